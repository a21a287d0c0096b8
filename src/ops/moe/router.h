// MoE router (spec §6.3), per token, fp32:
//   s = σ(logits);  sel = top-k of (s + bias)   (the bias only selects)
//   w_e = s_e / Σ_sel s   when k > 1 and renormalize; w_e = s_e otherwise;  w *= scale
// Ties in s + bias go to the lower expert id.
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

struct RouterParams {
  int64_t n_expert = 0;
  int64_t top_k = 0;
  bool renormalize = true;
  float scale = 1.0f;  // routed_scaling_factor
};

// logits [T, n_expert], bias [n_expert] -> sel [T, top_k] (ascending expert id per token),
// weight [T, top_k].
using RouterFn = void(const float* logits, const float* bias, RouterParams p, int64_t T,
                      int32_t* sel, float* weight);
// Backward through the selected sigmoid scores (the selection itself is not differentiated):
// adds dlogits [T, n_expert] given the forward's sel [T, top_k] and dweight [T, top_k].
using RouterBwdFn = void(const float* logits, const int32_t* sel, RouterParams p, int64_t T,
                         const float* dweight, float* dlogits);
extern const OpTable<RouterFn, RouterBwdFn> kRouterOp;  // "router": ref, cpu, bwd
void route_tokens_bwd(const float* logits, const int32_t* sel, RouterParams p, int64_t T,
                      const float* dweight, float* dlogits);

// logits [n_expert], bias [n_expert] -> sel [top_k] (ascending expert id), weight [top_k].
void route_token(const float* logits, const float* bias, RouterParams p, int32_t* sel,
                 float* weight);
// route_token for each of T tokens.
void route_tokens(const float* logits, const float* bias, RouterParams p, int64_t T, int32_t* sel,
                  float* weight);
// Plain reference: double scores, a full sort of the biased scores per token.
void route_tokens_ref(const float* logits, const float* bias, RouterParams p, int64_t T,
                      int32_t* sel, float* weight);

}  // namespace k3
