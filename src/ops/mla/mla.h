// Gated NoPE MLA attention core (spec §4). No rotary embedding anywhere: the "rope" part of
// each query/key is plain learned content shared by all heads. Scale = (Dn + Dr)^-1/2.
//
// Expanded (prefill, §4.2): per head h, k_h = [k_h^N ; r], scores q_h·k_h, softmax over the
// causal window, o_h = Σ p v_h.
// Absorbed (decode, §4.3): the cache holds the normalised latent ĉ (Dc) and r (Dr) per token;
//   q̃_h = W_UK,hᵀ q_h^N (Dc),  s_τ = q̃_h·ĉ_τ + q_h^R·r_τ,  o_h = W_UV,h Σ_τ p_τ ĉ_τ.
// Both: query t (0-based in this call) sits at absolute position n_past + t and sees cache
// positions 0 … n_past + t.
#pragma once

#include <cstdint>

#include "ops/linear/linear.h"

namespace k3 {

struct MlaShape {
  int64_t T = 0;       // new query tokens
  int64_t n_past = 0;  // cached tokens before them (the cache holds n_past + T rows)
  int64_t H = 0;       // heads
  int64_t Dn = 0;      // qk_nope_head_dim
  int64_t Dr = 0;      // qk_rope_head_dim
  int64_t Dv = 0;      // v_head_dim
  int64_t Dc = 0;      // kv_lora_rank
};

// q [T, H, Dn+Dr]; k [S, H, Dn+Dr]; v [S, H, Dv] (S = n_past + T); o [T, H, Dv].
void mla_attention_expanded(const float* q, const float* k, const float* v, MlaShape s, float* o);

// q [T, H, Dn+Dr]; cache [S, Dc+Dr]; kv_b [H*(Dn+Dv), Dc]; o [T, H, Dv].
void mla_attention_absorbed(const float* q, const float* cache, const Mat& kv_b, MlaShape s,
                            float* o);

}  // namespace k3
