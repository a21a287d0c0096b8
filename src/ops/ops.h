// The ops as the model calls them: tensors in, tensors out, a Ctx for the backend and the
// workspace. Each binding checks its tensor contract (dtypes, shapes, contiguity; a bad call
// names the op and the mismatch) and dispatches through the op registry to the launcher for
// ctx's backend. The launchers (raw pointers + shape structs) live in the op folders.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "backend/ctx.h"
#include "core/paged_rows.h"
#include "ops/conv1d/conv1d.h"
#include "ops/linear/linear.h"
#include "ops/mla/mla.h"
#include "ops/moe/moe_experts.h"
#include "ops/moe/router.h"
#include "ops/situ/situ.h"

namespace k3::op {

using Weights = std::span<const float>;  // a small fp32 weight vector (norm gains, taps, …)

// out [T, d] = table[ids[t]] (rows widened to fp32; exact, so no separate reference).
void embed(Ctx& ctx, const Mat& table, std::span<const int64_t> ids, const Tensor& out);

// y[...] = value over a contiguous tensor.
void fill(Ctx& ctx, const Tensor& y, float value);

// dst = src, element by element over the same shape (up to 4-D); either side may be a strided
// view, and a source stride of 0 broadcasts. Moves activations between layouts.
void copy(Ctx& ctx, const Tensor& src, const Tensor& dst);
// dst_rows[i][0 … width) = src row i; src [n, width] contiguous (rows to separate places).
void scatter_rows(Ctx& ctx, const Tensor& src, std::span<float* const> dst_rows);
// dst [n, width] = src[rows[i]]
void gather_rows(Ctx& ctx, const Tensor& src, std::span<const int64_t> rows, const Tensor& dst);

// y [T, w.rows] = x [T, w.cols] · wᵀ
void linear(Ctx& ctx, const Tensor& x, const Mat& w, const Tensor& y);
// Projections sharing x: ys[i] [T, ws[i]->rows] = x · ws[i]ᵀ (one launch for a decode step's
// BF16 matrices on a device).
void linear_multi(Ctx& ctx, const Tensor& x, std::initializer_list<const Mat*> ws,
                  std::initializer_list<Tensor> ys);

// Row-wise norms over the last dimension of [rows, n] (x's rows may be strided).
void rms_norm(Ctx& ctx, const Tensor& x, Weights w, float eps, const Tensor& y);
void gated_rms_norm(Ctx& ctx, const Tensor& x, const Tensor& z, Weights w, float eps,
                    const Tensor& y);
void l2_norm(Ctx& ctx, const Tensor& x, float eps, const Tensor& y);

// Element-wise, over same-shaped contiguous tensors (y may be an input).
void sigmoid(Ctx& ctx, const Tensor& x, const Tensor& y);
void scale(Ctx& ctx, const Tensor& x, float s, const Tensor& y);
void add(Ctx& ctx, const Tensor& a, const Tensor& b, const Tensor& y);
void mul_sigmoid(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& y);
void situ_glu(Ctx& ctx, const Tensor& gate, const Tensor& up, SituParams p, const Tensor& y);

// y [T, C] = SiLU(causal conv of x [T, C] with taps [C, W]); state [C, W-1] in/out.
void conv1d_silu(Ctx& ctx, const Tensor& x, Weights taps, int64_t W, float* state, const Tensor& y);
// The same over a step's varlen batch: sequence i's rows t0 … t0+n-1 of x, y [T, C] with its own
// history seqs[i].state [C, W-1] (in/out); one call (one launch) for all sequences.
void conv1d_silu_batch(Ctx& ctx, const Tensor& x, Weights taps, int64_t W,
                       std::span<const Conv1dSeq> seqs, const Tensor& y);
// g [T, H, K] = L·σ(exp(A_log[h])·(f + dt_bias)); f [T, H, K].
void kda_gate(Ctx& ctx, const Tensor& f, Weights A_log, Weights dt_bias, float lower_bound,
              const Tensor& g);
// The delta rule over a step's rows (varlen): q, k, g [T, H, K], v [T, H, V], beta [T, H];
// o [T, H, V]. Sequence i owns rows t0 … t0+n-1 and its recurrent state S [H, K, V] (in/out).
// Several-token sequences run chunked (parallel over heads); all single-token sequences run
// recurrent in one parallel loop over (sequence, head), so a step of many decode tokens pays
// one fork/join.
struct KdaTensors {
  Tensor q, k, v, g, beta;
};
struct KdaSeq {
  int64_t t0 = 0, n = 0;
  float* S = nullptr;
};
void kda(Ctx& ctx, const KdaTensors& in, std::span<const KdaSeq> seqs, const Tensor& o);

// MLA attention of one fresh sequence (no history): q [T, H, Dn+Dr], k [T, H, Dn+Dr],
// v [T, H, Dv] -> o [T, H, Dv].
void mla_expanded(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, MlaShape s,
                  const Tensor& o);
// The absorbed form over a step's rows (varlen): sequence i's queries are rows t0 … t0+n-1 of
// q [T, H, Dn+Dr], attending over its paged cache (n_past + n rows); one parallel loop over
// (sequence, head). o [T, H, Dv]. `dims` gives H, Dn, Dr, Dv, Dc (its T and n_past unused).
using MlaSeq = MlaBatchSeq;  // t0, n, n_past, cache
void mla_absorbed(Ctx& ctx, const Tensor& q, std::span<const MlaSeq> seqs,
                  const MlaAbsorbedWeights& w, MlaShape dims, const Tensor& o);

// Block AttnRes mix over candidates (each [T, d]); w [d]; out [T, d].
void attn_res_mix(Ctx& ctx, std::span<const float* const> cands, const Tensor& out, Weights w,
                  float eps);
// The same mix, RMS-normalised with w_norm [d] (both with eps): out [T, d].
void attn_res_norm(Ctx& ctx, std::span<const float* const> cands, const Tensor& out, Weights w,
                   Weights w_norm, float eps);

// logits [T, E] -> sel (i32) [T, k], weight [T, k].
void route(Ctx& ctx, const Tensor& logits, Weights bias, RouterParams p, const Tensor& sel,
           const Tensor& weight);
// c [T, L] = the routed experts' combine over the choices sel (i32) [T, k] with weight [T, k],
// from the latent input z [T, L]; experts [E] (ops/moe/moe_experts.h).
void moe_experts(Ctx& ctx, const Tensor& z, const Tensor& sel, const Tensor& weight,
                 std::span<const ExpertMats> experts, SituParams situ, const Tensor& c);
// dst [n, width] = src[choice[i] / k]  (an expert's input rows)
void gather_choice_rows(Ctx& ctx, const Tensor& src, std::span<const int64_t> choice, int64_t k,
                        const Tensor& dst);
// c[choice[i] / k] += weight[choice[i]] · y[i]  (the routed experts' fp32 combine)
void moe_scatter_add(Ctx& ctx, const Tensor& y, std::span<const int64_t> choice,
                     const Tensor& weight, int64_t k, const Tensor& c);

}  // namespace k3::op
