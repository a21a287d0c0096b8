// Block Attention Residuals mixing operator (spec §5.1), per token:
//   candidates v_0 … v_{n-1} (sealed slots, then the current prefix sum LAST)
//   s_i = Σ_d v_i[d] · ρ_i · w[d],   ρ_i = 1/sqrt(mean(v_i²) + eps),   w = w_norm ⊙ w_proj
//   out = Σ_i softmax(s)_i · v_i      (scores from normalised candidates, mix of RAW ones)
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

struct AttnResShape {
  int64_t n = 0;  // candidates (>= 1)
  int64_t T = 0;  // tokens
  int64_t d = 0;  // width
};

// cands[i] points to [T, d]; w [d]; out [T, d] (must not alias a candidate).
using AttnResMixFn = void(const float* const* cands, AttnResShape s, const float* w, float eps,
                          float* out);
// Backward: adds dcands[i] [T, d] (null entries skip a candidate) and dw [d] given dout [T, d].
using AttnResMixBwdFn = void(const float* const* cands, AttnResShape s, const float* w, float eps,
                             const float* dout, float* const* dcands, float* dw);
extern const OpTable<AttnResMixFn, AttnResMixBwdFn> kAttnResMixOp;  // "attn_res_mix"
void attn_res_mix_bwd(const float* const* cands, AttnResShape s, const float* w, float eps,
                      const float* dout, float* const* dcands, float* dw);

void attn_res_mix(const float* const* cands, AttnResShape s, const float* w, float eps, float* out);

// The mix and the RMSNorm of the layer input it feeds, one op (inference): out [T, d] =
// rms_norm(attn_res_mix(cands; w), w_norm). One launch on a device instead of three (scores,
// mix, norm), the mix never stored.
using AttnResNormFn = void(const float* const* cands, AttnResShape s, const float* w,
                           const float* w_norm, float eps, float* out);
extern const OpTable<AttnResNormFn> kAttnResNormOp;  // "attn_res_norm"

// Plain double reference.
void attn_res_mix_ref(const float* const* cands, AttnResShape s, const float* w, float eps,
                      float* out);

}  // namespace k3
