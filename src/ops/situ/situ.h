// SiTU-GLU (spec §6.1): φ(a, b) = β₁·tanh(a/β₁)·σ(a) · β₂·tanh(b/β₂).
// The gate branch lies in [-0.2698, β₁) and the up branch is soft-capped at ±β₂, so the
// activation is bounded (a = b = 40 gives 92.17 where SwiGLU gives 1600).
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

struct SituParams {
  float beta = 4.0f;          // activation_situ_beta (gate soft cap)
  float linear_beta = 25.0f;  // activation_situ_linear_beta (up-branch soft cap)
};

// gate [n], up [n] -> out [n]: out[i] = φ(gate[i], up[i]); out may alias gate.
using SituGluFn = void(const float* gate, const float* up, int64_t n, SituParams p, float* out);
// Backward: adds dgate [n], dup [n] given dout [n].
using SituGluBwdFn = void(const float* gate, const float* up, int64_t n, SituParams p,
                          const float* dout, float* dgate, float* dup);
extern const OpTable<SituGluFn, SituGluBwdFn> kSituGluOp;  // "situ_glu": ref, cpu, bwd
void situ_glu_bwd(const float* gate, const float* up, int64_t n, SituParams p, const float* dout,
                  float* dgate, float* dup);

// φ(a, b) in double (the closed form the spec's table is checked against).
double situ_glu_ref(double a, double b, SituParams p);
// situ_glu_ref element by element.
void situ_glu_ref_array(const float* gate, const float* up, int64_t n, SituParams p, float* out);

void situ_glu(const float* gate, const float* up, int64_t n, SituParams p, float* out);

}  // namespace k3
