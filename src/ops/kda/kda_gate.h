// KDA decay gate (spec §3.4, the "safe gate"), per token t, head h, key channel i:
//   g[t,h,i] = L · σ( exp(A_log[h]) · (f[t,h,i] + dt_bias[h,i]) )
// with L = lower_bound < 0, so g ∈ (L, 0) is the log decay the delta rule consumes.
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

struct KdaGateShape {
  int64_t T = 0;  // tokens
  int64_t H = 0;  // heads
  int64_t K = 0;  // key dim
  float lower_bound = 0;
};

// f [T, H, K], A_log [H], dt_bias [H, K] -> g [T, H, K] (may alias f).
using KdaGateFn = void(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s,
                       float* g);
// Backward: adds df [T, H, K], dA_log [H], ddt_bias [H, K] given dg [T, H, K].
using KdaGateBwdFn = void(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s,
                          const float* dg, float* df, float* dA_log, float* ddt_bias);
extern const OpTable<KdaGateFn, KdaGateBwdFn> kKdaGateOp;  // "kda_gate": ref, cpu, bwd
void kda_gate_bwd(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s,
                  const float* dg, float* df, float* dA_log, float* ddt_bias);

// fp32, the same expression the layer used inline (bit-identical).
void kda_gate(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s, float* g);
// Plain reference in double.
void kda_gate_ref(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s,
                  float* g);

}  // namespace k3
