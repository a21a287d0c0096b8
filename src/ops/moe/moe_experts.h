// The routed experts of a LatentMoE layer (spec §6) as one op: every token's k choices run
// their expert's SiTU-GLU FFN on the token's latent input, and the outputs are combined with
// the routing weights in fp32:
//   c[t] = Σ_j weight[t, j] · down_e(φ(gate_e · z[t], up_e · z[t])),  e = sel[t, j],
// summed in j order (sel is ascending per token, so that is expert order) from zero.
// The CPU version groups the choices by expert and runs each expert once on all its rows; the
// device version groups on the device and runs all experts in a few launches.
#pragma once

#include <cstdint>

#include "ops/linear/linear.h"
#include "ops/situ/situ.h"

namespace k3 {

struct ExpertMats {
  Mat gate, up, down;  // [I, L], [I, L], [L, I]
};

struct MoeExpertsShape {
  int64_t T = 0;  // tokens
  int64_t k = 0;  // choices per token
  int64_t E = 0;  // experts
  SituParams situ;
  // The device may carry the expert inputs (z and the SiTU-GLU output) as bf16, rounded once,
  // with fp32 accumulation, in steps of more than 128 tokens (prefill GEMMs; about 1e-3
  // relative error, its own test). false keeps fp32-grade results (the op's 1e-5); the CPU
  // ignores it. op::moe_experts sets it in bf16 precision (core/precision.h).
  bool bf16_act = false;
};

// z [T, L], sel (i32) [T, k] (expert ids in [0, E), ascending per token), weight [T, k],
// experts [E] (host array; all experts of one shape and format) -> c [T, L] (overwritten).
using MoeExpertsFn = void(const float* z, const int32_t* sel, const float* weight,
                          const ExpertMats* experts, MoeExpertsShape s, float* c);
extern const OpTable<MoeExpertsFn> kMoeExpertsOp;  // "moe_experts"

void moe_experts(const float* z, const int32_t* sel, const float* weight, const ExpertMats* experts,
                 MoeExpertsShape s, float* c);
// Plain reference: every (token, choice) on its own, in double.
void moe_experts_ref(const float* z, const int32_t* sel, const float* weight,
                     const ExpertMats* experts, MoeExpertsShape s, float* c);

}  // namespace k3
