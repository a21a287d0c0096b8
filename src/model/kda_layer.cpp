// KDA sublayer (spec §3): projections, short conv + SiLU, safe decay gate, β, q/k L2 norm,
// the delta-rule core (chunked for several new tokens, recurrent for one), gated RMSNorm,
// o_proj. Each sequence's conv history and recurrent state live in its state-pool slot.
#include <cmath>
#include <cstdlib>

#include "model/layers.h"
#include "ops/ops.h"

namespace k3 {
namespace {

// Which conv history of the slot a projection feeds.
enum class ConvOf { q, k, v };

// y [T, P] = SiLU(conv(pre)) for a projection pre [T, P], each sequence continuing its own
// conv history.
void short_conv(const Tensor& pre, const Vec& taps, ConvOf which, int64_t W, int64_t kda_index,
                LayerCtx& lc, const Tensor& y) {
  Ctx& ctx = lc.ctx;
  const int64_t B = lc.plan.n_seqs;
  Conv1dSeq* seqs = ctx.host().alloc<Conv1dSeq>(B);
  for (int64_t i = 0; i < B; ++i) {
    const SeqSpan& s = lc.plan.seqs[i];
    KdaSlotView st = lc.pool.kda(s.seq, kda_index);
    float* hist = which == ConvOf::q ? st.conv_q : which == ConvOf::k ? st.conv_k : st.conv_v;
    seqs[i] = {s.t0, s.n, hist};
  }
  if (!step_per_sequence()) {  // all sequences in one call
    op::conv1d_silu_batch(ctx, pre, taps, W, {seqs, static_cast<size_t>(B)}, y);
    return;
  }
  for (int64_t i = 0; i < B; ++i) {
    const Conv1dSeq& q = seqs[i];
    op::conv1d_silu(ctx, pre.rows(q.t0, q.n), taps, W, q.state, y.rows(q.t0, q.n));
  }
}

}  // namespace

bool step_per_sequence() {
  const char* v = std::getenv("K3_STEP_PER_SEQUENCE");
  return v != nullptr && v[0] == '1';
}

void kda_layer(const Tensor& x, const KdaWeights& w, const HParams& hp, int64_t kda_index,
               LayerCtx& lc, const Tensor& out) {
  Ctx& ctx = lc.ctx;
  CtxScope scope(ctx);
  const KdaHParams& kp = hp.kda;
  const int64_t T = x.dim(0), H = kp.n_head, K = kp.head_dim, P = kp.proj_dim();
  const int64_t W = kp.conv_kernel;
  // Every projection of x at once: q, k, v (before their convs), the output gate z, the decay's
  // low-rank factor and beta.
  Tensor pq = ctx.tensor({T, P}), pk = ctx.tensor({T, P}), pv = ctx.tensor({T, P});
  Tensor z = ctx.tensor({T, H, K});          // output gate
  Tensor low = ctx.tensor({T, w.f_a.rows});  // [T, rank]
  Tensor beta = ctx.tensor({T, H});
  op::linear_multi(ctx, x, {&w.q, &w.k, &w.v, &w.g, &w.f_a, &w.b},
                   {pq, pk, pv, z.view({T, P}), low, beta});
  Tensor q = ctx.tensor({T, H, K}), k = ctx.tensor({T, H, K}), v = ctx.tensor({T, H, K});
  short_conv(pq, w.q_conv, ConvOf::q, W, kda_index, lc, q.view({T, P}));
  short_conv(pk, w.k_conv, ConvOf::k, W, kda_index, lc, k.view({T, P}));
  short_conv(pv, w.v_conv, ConvOf::v, W, kda_index, lc, v.view({T, P}));

  Tensor g = ctx.tensor({T, H, K});  // log decay
  op::linear(ctx, low, w.f_b, g.view({T, P}));
  op::kda_gate(ctx, g, w.A_log, w.dt_bias, kp.gate_lower_bound, g);
  op::sigmoid(ctx, beta, beta);
  op::l2_norm(ctx, q, 1e-6f, q);
  op::l2_norm(ctx, k, 1e-6f, k);
  op::scale(ctx, q, 1.0f / std::sqrt(static_cast<float>(K)), q);

  op::KdaSeq* seqs = ctx.host().alloc<op::KdaSeq>(lc.plan.n_seqs);
  for (int64_t i = 0; i < lc.plan.n_seqs; ++i) {
    const SeqSpan& s = lc.plan.seqs[i];
    seqs[i] = {s.t0, s.n, lc.pool.kda(s.seq, kda_index).S};
  }
  Tensor o = ctx.tensor({T, H, K});  // [T, H, V]
  op::kda(ctx, {q, k, v, g, beta}, {seqs, static_cast<size_t>(lc.plan.n_seqs)}, o);
  op::gated_rms_norm(ctx, o, z, w.o_norm, hp.rms_eps, o);
  op::linear(ctx, o.view({T, P}), w.o, out);
}

}  // namespace k3
