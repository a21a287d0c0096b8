// Gated NoPE MLA attention core (spec §4). No rotary embedding anywhere: the "rope" part of
// each query/key is plain learned content shared by all heads. Scale = (Dn + Dr)^-1/2.
//
// Expanded (a prompt's first chunk, §4.2): per head h, k_h = [k_h^N ; r], scores q_h·k_h,
// softmax over the causal window, o_h = Σ p v_h.
// Absorbed (decode and later chunks, §4.3): the cache holds the normalised latent ĉ (Dc) and r
// (Dr) per token;
//   q̃_h = W_UK,hᵀ q_h^N (Dc),  s_τ = q̃_h·ĉ_τ + q_h^R·r_τ,  o_h = W_UV,h Σ_τ p_τ ĉ_τ.
// The absorbed form never expands the history, so a long prompt prefilled in chunks costs
// the same attention work as one pass. Its softmax is computed online over key tiles, so its
// scratch does not grow with the context.
// Both: query t (0-based in this call) sits at absolute position n_past + t and sees cache
// positions 0 … n_past + t.
#pragma once

#include <cstdint>

#include "core/paged_rows.h"
#include "ops/linear/linear.h"
#include "ops/registry.h"

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

// The absorbed form's view of kv_b [H*(Dn+Dv), Dc], split once at load time: the key rows of
// every head transposed, and the value rows used in place.
struct MlaAbsorbedWeights {
  Mat uk_t;  // [H*Dc, Dn]: head h's W_UKᵀ at rows h*Dc … h*Dc+Dc-1
  Mat kv_b;  // [H*(Dn+Dv), Dc]: head h's W_UV at rows h*(Dn+Dv)+Dn …
};

// q [T, H, Dn+Dr]; k [S, H, Dn+Dr]; v [S, H, Dv] (S = n_past + T); o [T, H, Dv].
using MlaExpandedFn = void(const float* q, const float* k, const float* v, MlaShape s, float* o);
// q [T, H, Dn+Dr]; cache rows [S, Dc+Dr] (paged); o [T, H, Dv].
using MlaAbsorbedFn = void(const float* q, const PagedRows& cache, const MlaAbsorbedWeights& w,
                           MlaShape s, float* o);
// Backward of the expanded form (causal softmax attention): adds dq [T, H, Dn+Dr],
// dk [S, H, Dn+Dr], dv [S, H, Dv] given d_o [T, H, Dv].
using MlaExpandedBwdFn = void(const float* q, const float* k, const float* v, MlaShape s,
                              const float* d_o, float* dq, float* dk, float* dv);
extern const OpTable<MlaExpandedFn, MlaExpandedBwdFn> kMlaExpandedOp;  // "mla_expanded"
void mla_attention_expanded_bwd(const float* q, const float* k, const float* v, MlaShape s,
                                const float* d_o, float* dq, float* dk, float* dv);
extern const OpTable<MlaAbsorbedFn> kMlaAbsorbedOp;  // "mla_absorbed"

// The absorbed form over many sequences at once (a step's varlen batch): sequence i's n
// queries are rows t0 … t0+n-1 of q [T, H, Dn+Dr] at positions n_past …, over its own paged
// cache; o rows of the sequences only (other rows are left as they are). `dims` gives H, Dn,
// Dr, Dv, Dc (its T and n_past unused). On the GPU: one split-KV launch for all of them.
struct MlaBatchSeq {
  int64_t t0 = 0, n = 0, n_past = 0;
  PagedRows cache;
};
using MlaAbsorbedBatchFn = void(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                                const MlaAbsorbedWeights& w, MlaShape dims, float* o);
extern const OpTable<MlaAbsorbedBatchFn> kMlaAbsorbedBatchOp;  // "mla_absorbed_batch"
void mla_absorbed_batch(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                        const MlaAbsorbedWeights& w, MlaShape dims, float* o);
void mla_absorbed_batch_ref(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                            const MlaAbsorbedWeights& w, MlaShape dims, float* o);

void mla_attention_expanded(const float* q, const float* k, const float* v, MlaShape s, float* o);
void mla_attention_absorbed(const float* q, const PagedRows& cache, const MlaAbsorbedWeights& w,
                            MlaShape s, float* o);

// The same for head h only (callers that parallelise over sequences and heads themselves).
void mla_attention_absorbed_head(const float* q, const PagedRows& cache,
                                 const MlaAbsorbedWeights& w, MlaShape s, int64_t h, float* o);

// Plain double references. The expanded one attends over the given keys and values; the
// absorbed one expands every cached latent through w.kv_b (w.uk_t unused) and attends.
void mla_attention_expanded_ref(const float* q, const float* k, const float* v, MlaShape s,
                                float* o);
void mla_attention_ref(const float* q, const PagedRows& cache, const MlaAbsorbedWeights& w,
                       MlaShape s, float* o);

// The expanded form one query and key at a time (mla.cpp): the loop the matrix form
// (mla_expanded_f32.cpp, the registered cpu one) replaced, kept as a second fp32 reference.
void mla_attention_expanded_loop(const float* q, const float* k, const float* v, MlaShape s,
                                 float* o);

}  // namespace k3
