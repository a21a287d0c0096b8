// The routed MXFP4 experts of a decode step on the tensor cores (moe_mma.cu), used by
// moe_experts_cuda (moe.cu) for steps of up to kMmaMaxT tokens.
//
// Every activation that meets an expert matrix is carried as P bf16 parts, each its own column
// of the MMA's B operand: slot s (one token choice) is columns P·s … P·s + P - 1. P = 3 (x = hi
// + mid + lo to about 2^-27 relative): the weights are decoded from the packed nibbles straight
// into bf16 A fragments (E2M1 × 2^(scale-127) is exact in bf16), so the products are exact and
// the fp32 accumulation keeps the result fp32-grade; the partial results are added
// (hi + (mid + lo)) by whoever reads them next (SiTU, combine). P = 1 (bf16 precision,
// MoeExpertsShape::bf16_act): x rounded to bf16 once, a third of the columns.
//
// Within each 32-column MXFP4 group the bf16 parts are stored in the order the A fragments are
// decoded in (perm_in_group), so a lane loads its B fragments with 16-byte reads.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/situ/situ.h"

namespace k3::cuda {

constexpr int64_t kMmaMaxT = 128;

// One expert's three matrices: gate, up [I, L]; down [L, I] (packed nibbles + E8M0 scales).
struct Mxfp4Expert {
  const uint8_t* data[3];
  const uint8_t* scales[3];
};

// The grouping of a step's N = T·k choices by expert (device arrays, moe.cu builds them).
struct MoeGroups {
  const int32_t* offsets;   // [E + 1] first slot of each expert
  const int32_t* active;    // [E] experts with slots, first n_active
  const int32_t* n_active;  // [1]
  int64_t max_active;       // grid bound: min(E, N)
};

// zs [P·N, L]: the P parts of z[choice_of[s] / k] for every slot s (P = 1 or 3).
void moe_gather_split(const float* z, const int32_t* choice_of, int64_t N, int64_t k, int64_t L,
                      int P, __nv_bfloat16* zs);
// y3 [P·N, R] (per matrix in which[0 .. n_which)) = parts · W_eᵀ for every active expert.
void moe_mxfp4_mma(const __nv_bfloat16* xs, int P, const MoeGroups& g, const Mxfp4Expert* experts,
                   int which0, int n_which, int64_t R, int64_t C, int64_t N, int64_t T,
                   float* const* y3);
// hs [P·N, I]: the parts of SiTU-GLU(gate, up), gate and up read as summed parts [P·N, I].
void moe_situ_split(const float* gate3, const float* up3, int64_t N, int64_t I, int P, SituParams p,
                    __nv_bfloat16* hs);
// c [T, L] = Σ_j weight[t, j] · y[slot_of[t·k + j]], y read as summed parts y3 [P·N, L].
void moe_combine3(const float* y3, int P, const int32_t* slot_of, const float* weight, int64_t T,
                  int64_t k, int64_t L, float* c);

}  // namespace k3::cuda
