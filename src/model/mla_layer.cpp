// Gated NoPE MLA sublayer (spec §4): LoRA query, latent KV (cached as ĉ ‖ r in the paged
// cache), attention per sequence (expanded on a fresh prompt, absorbed over the cache
// otherwise), sigmoid output gate, o_proj.
#include <algorithm>

#include "core/error.h"
#include "model/layers.h"
#include "ops/ops.h"

namespace k3 {
namespace {

// Expands n latent rows a [n, Dc+Dr] into per-head keys k [n, H, Dn+Dr] = [k^N ; r] (r shared
// by all heads) and values v [n, H, Dv].
void expand_kv(const Tensor& a, const MlaWeights& w, const MlaHParams& m, Ctx& ctx, const Tensor& k,
               const Tensor& v) {
  CtxScope scope(ctx);
  const int64_t n = a.dim(0), Dc = m.kv_lora_rank, Dr = m.qk_rope, Dn = m.qk_nope, Dv = m.v_head;
  const int64_t H = m.n_head;
  Tensor latent = ctx.tensor({n, Dc});
  Tensor kv = ctx.tensor({n, H, Dn + Dv});
  op::copy(ctx, a.slice_last(0, Dc), latent);
  op::linear(ctx, latent, w.kv_b, kv.view({n, H * (Dn + Dv)}));
  op::copy(ctx, kv.slice_last(0, Dn), k.slice_last(0, Dn));
  op::copy(ctx, kv.slice_last(Dn, Dv), v);
  const Tensor r = a.slice_last(Dc, Dr);  // [n, Dr] -> [n, H, Dr], the head stride 0
  op::copy(ctx, Tensor::strided(r.data, DType::f32, {n, H, Dr}, {r.stride[0], 0, 1}),
           k.slice_last(Dn, Dr));
}

// Appends each sequence's new latent rows [n, Dc+Dr] to its cache: one scatter of the step's
// rows to their cache rows (K3_STEP_PER_SEQUENCE=1: one copy per run of positions that share a
// cache block, their rows adjacent there).
void append_latents(const Tensor& a, int64_t mla_index, LayerCtx& lc) {
  const int64_t width = a.dim(-1), bt = lc.pool.block_tokens();
  if (!step_per_sequence()) {
    float** rows = lc.ctx.host().alloc<float*>(lc.plan.T);
    int64_t filled = 0;
    for (int64_t i = 0; i < lc.plan.n_seqs; ++i) {
      const SeqSpan& s = lc.plan.seqs[i];
      for (int64_t t = 0; t < s.n; ++t)
        rows[s.t0 + t] = lc.pool.mla_row(s.seq, mla_index, s.n_past + t);
      filled += s.n;
    }
    check(filled == lc.plan.T, "mla: the plan's sequences cover ", filled, " of ", lc.plan.T,
          " rows");
    op::scatter_rows(lc.ctx, a, {rows, static_cast<size_t>(lc.plan.T)});
    return;
  }
  for (int64_t i = 0; i < lc.plan.n_seqs; ++i) {
    const SeqSpan& s = lc.plan.seqs[i];
    for (int64_t t = 0; t < s.n;) {
      const int64_t pos = s.n_past + t, m = std::min(s.n - t, bt - pos % bt);
      float* row = lc.pool.mla_row(s.seq, mla_index, pos);
      op::copy(lc.ctx, a.rows(s.t0 + t, m), Tensor::of(row, {m, width}));
      t += m;
    }
  }
}

// o [T, H, Dv]: every sequence's new queries q [T, H, Dn+Dr] over its cache. Fresh prompts
// expand just their new rows (never the cache); all others run the absorbed form together.
void attend(const Tensor& q, const Tensor& a, const MlaWeights& w, const MlaHParams& m,
            int64_t mla_index, LayerCtx& lc, const Tensor& o) {
  Ctx& ctx = lc.ctx;
  const int64_t H = m.n_head, Dq = m.qk_head(), Dv = m.v_head;
  const MlaShape dims{0, 0, H, m.qk_nope, m.qk_rope, Dv, m.kv_lora_rank};
  op::MlaSeq* absorbed = ctx.host().alloc<op::MlaSeq>(lc.plan.n_seqs);
  size_t n_absorbed = 0;
  for (int64_t i = 0; i < lc.plan.n_seqs; ++i) {
    const SeqSpan& s = lc.plan.seqs[i];
    if (!s.mla_expanded()) {
      absorbed[n_absorbed++] = {s.t0, s.n, s.n_past, lc.pool.mla(s.seq, mla_index)};
      continue;
    }
    CtxScope scope(ctx);
    Tensor k = ctx.tensor({s.n, H, Dq}), v = ctx.tensor({s.n, H, Dv});
    expand_kv(a.rows(s.t0, s.n), w, m, ctx, k, v);
    MlaShape sh = dims;
    sh.T = s.n;
    op::mla_expanded(ctx, q.rows(s.t0, s.n), k, v, sh, o.rows(s.t0, s.n));
  }
  if (n_absorbed > 0) op::mla_absorbed(ctx, q, {absorbed, n_absorbed}, w.absorbed, dims, o);
}

}  // namespace

void mla_layer(const Tensor& x, const MlaWeights& w, const HParams& hp, int64_t mla_index,
               LayerCtx& lc, const Tensor& out) {
  Ctx& ctx = lc.ctx;
  CtxScope scope(ctx);
  const MlaHParams& m = hp.mla;
  const int64_t T = x.dim(0), H = m.n_head, Dv = m.v_head, Dc = m.kv_lora_rank;
  const int64_t Dw = m.cache_width();

  // The projections of x at once: the query's low rank, the latent with its rope part, the
  // output gate.
  Tensor cq = ctx.tensor({T, m.q_lora_rank});
  Tensor a = ctx.tensor({T, Dw});  // latent c, then r (r is not normalised)
  Tensor gate = ctx.tensor({T, H, Dv});
  op::linear_multi(ctx, x, {&w.q_a, &w.kv_a, &w.g}, {cq, a, gate.view({T, H * Dv})});
  Tensor q = ctx.tensor({T, H, m.qk_head()});
  op::rms_norm(ctx, cq, w.q_a_norm, hp.mla_lora_eps, cq);
  op::linear(ctx, cq, w.q_b, q.view({T, H * m.qk_head()}));

  const Tensor c = a.slice_last(0, Dc);  // the latent part (rows Dc+Dr apart), in place
  op::rms_norm(ctx, c, w.kv_a_norm, hp.mla_lora_eps, c);
  append_latents(a, mla_index, lc);

  Tensor o = ctx.tensor({T, H, Dv});
  attend(q, a, w, m, mla_index, lc, o);
  op::mul_sigmoid(ctx, o, gate, o);
  op::linear(ctx, o.view({T, H * Dv}), w.o, out);
}

}  // namespace k3
