// The routed MXFP4 experts of a large step (prefill: more than kMmaMaxT tokens) as grouped
// GEMMs on the tensor cores (moe_gemm.cu), used by moe_experts_cuda (moe.cu). The choices are
// grouped by expert on the device (moe.cu); every launch covers all experts, its tiles found
// from the group offsets on the device (no copy to the host):
//   tiles      one entry per (expert, 128 of its slots)
//   gather     xs [P, N, L] bf16: slot s holds z[choice_of[s] / k]
//   gate/up    hs [P, N, I] bf16 = SiTU-GLU(xs · gateᵀ, xs · upᵀ), both in one tile
//   down       y [N, L] fp32 = hs · downᵀ
// P is the number of bf16 parts an activation is carried as: 1 (bf16_act: rounded once, the
// prefill's choice; about 1e-3 relative error) or 3 (x = hi + mid + lo to about 2^-27, the
// op's fp32-grade path: the parts of one activation meet the same weight fragment and add up
// in the same fp32 accumulator). The MXFP4 weights are decoded once per tile into shared memory
// as bf16 (E2M1 × 2^(s-127) is exact in bf16), so every product is exact; fp32 accumulation.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/situ/situ.h"

namespace k3::cuda {

constexpr int kGemmTileM = 128;  // slots per tile

// One expert's packed matrices: gate, up [I, L]; down [L, I] (nibbles + E8M0 scales).
struct MoeGemmExpert {
  const uint8_t* data[3];
  const uint8_t* scales[3];
};

// The tiles of a step: tile i covers slots [row0[i], min(row0[i] + 128, end[i])) of expert
// expert[i]; n[0] tiles in all, at most max_tiles (the grid bound).
struct MoeGemmTiles {
  int32_t* expert;
  int32_t* row0;
  int32_t* end;
  int32_t* n;
  int64_t max_tiles;
};

// Bound on the tiles of N slots over E experts: ceil(N / 128) + min(E, N).
int64_t moe_gemm_max_tiles(int64_t N, int64_t E);
// Fills t (its arrays hold max_tiles entries) from offsets [E + 1].
void moe_gemm_tiles(const int32_t* offsets, int64_t E, const MoeGemmTiles& t);
// xs [P, N, L] (P = parts): the parts of z[choice_of[s] / k] for every slot s (L % 8 == 0).
void moe_gemm_gather(const float* z, const int32_t* choice_of, int64_t N, int64_t k, int64_t L,
                     int parts, __nv_bfloat16* xs);
// hs [P, N, I] = parts of SiTU-GLU(x · gate_eᵀ, x · up_eᵀ), x read as summed parts [P, N, L].
void moe_gemm_gate_up(const __nv_bfloat16* xs, int parts, const MoeGemmTiles& t,
                      const MoeGemmExpert* experts, int64_t N, int64_t L, int64_t I, SituParams p,
                      __nv_bfloat16* hs);
// y [N, L] fp32 = h · down_eᵀ, h read as summed parts [P, N, I].
void moe_gemm_down(const __nv_bfloat16* hs, int parts, const MoeGemmTiles& t,
                   const MoeGemmExpert* experts, int64_t N, int64_t I, int64_t L, float* y);

}  // namespace k3::cuda
