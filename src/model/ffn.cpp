// FFNs (spec §6): the dense SiTU-GLU FFN and Stable LatentMoE (router on the full-width x,
// latent down-projection, routed experts, fp32 weighted combine, RMSNorm, up-projection,
// plus shared experts on the full-width x). Every expert runs once per step on all the rows
// (of all sequences) that chose it.
#include <algorithm>
#include <span>

#include "model/layers.h"
#include "ops/ops.h"

namespace k3 {
namespace {

SituParams situ_params(const HParams& hp) { return {hp.situ_beta, hp.situ_linear_beta}; }

// out [T, w.down.rows] = down(φ(gate·x, up·x)); x [T, w.gate.cols].
void glu_ffn(const Tensor& x, const FfnWeights& w, SituParams p, Ctx& ctx, const Tensor& out) {
  CtxScope scope(ctx);
  const int64_t T = x.dim(0), I = w.gate.rows;
  Tensor a = ctx.tensor({T, I}), b = ctx.tensor({T, I});
  op::linear(ctx, x, w.gate, a);
  op::linear(ctx, x, w.up, b);
  op::situ_glu(ctx, a, b, p, a);
  op::linear(ctx, a, w.down, out);
}

// The T*k routing choices grouped by expert (a counting sort, stable): expert e's choices
// are order[start[e] … start[e+1]), each an index t*k + j into the routing arrays.
struct ExpertGroups {
  int64_t* start;  // [E+1]
  int64_t* order;  // [T*k]
  std::span<const int64_t> of(int64_t e) const {
    return {order + start[e], static_cast<size_t>(start[e + 1] - start[e])};
  }
};

ExpertGroups group_by_expert(const int32_t* sel, int64_t n, int64_t E, Arena& arena) {
  ExpertGroups g{arena.alloc<int64_t>(E + 1), arena.alloc<int64_t>(n)};
  std::fill(g.start, g.start + E + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++g.start[sel[i] + 1];
  for (int64_t e = 0; e < E; ++e) g.start[e + 1] += g.start[e];
  int64_t* fill = arena.alloc<int64_t>(E);
  std::copy_n(g.start, E, fill);
  for (int64_t i = 0; i < n; ++i) g.order[fill[sel[i]]++] = i;
  return g;
}

}  // namespace

void dense_ffn(const Tensor& x, const FfnWeights& w, const HParams& hp, Ctx& ctx,
               const Tensor& out) {
  glu_ffn(x, w, situ_params(hp), ctx, out);
}

void moe_block(const Tensor& x, const MoeWeights& w, const HParams& hp, Ctx& ctx,
               const Tensor& out) {
  CtxScope scope(ctx);
  const MoeHParams& m = hp.moe;
  const int64_t T = x.dim(0), L = m.d_latent, E = m.n_expert, k = m.n_used;
  Tensor logits = ctx.tensor({T, E});  // fp32 router logits
  Tensor sel = ctx.tensor({T, k}, DType::i32), weight = ctx.tensor({T, k});
  op::linear(ctx, x, w.router, logits);
  op::route(ctx, logits, w.router_bias, {E, k, m.renormalize, m.routed_scale}, sel, weight);

  Tensor z = ctx.tensor({T, L}), c = ctx.tensor({T, L});  // latent input; fp32 combine
  op::linear(ctx, x, w.latent_down, z);
  op::fill(ctx, c, 0.0f);
  // The grouping is planned on the host (the choices come back from the device first).
  const int32_t* sel_host = sel.ptr<int32_t>();
  if (ctx.backend.device() != Device::cpu) {
    int32_t* h = ctx.host().alloc<int32_t>(T * k);
    ctx.backend.copy_to_host(h, sel.data, static_cast<size_t>(T * k) * sizeof(int32_t));
    sel_host = h;
  }
  const ExpertGroups groups = group_by_expert(sel_host, T * k, E, ctx.host());
  for (int64_t e = 0; e < E; ++e) {
    const std::span<const int64_t> rows = groups.of(e);
    if (rows.empty()) continue;
    CtxScope expert_scope(ctx);
    const int64_t n = static_cast<int64_t>(rows.size());
    Tensor zin = ctx.tensor({n, L}), y = ctx.tensor({n, L});
    op::gather_choice_rows(ctx, z, rows, k, zin);
    glu_ffn(zin, w.experts[e], situ_params(hp), ctx, y);
    op::moe_scatter_add(ctx, y, rows, weight, k, c);
  }
  op::rms_norm(ctx, c, w.latent_norm, hp.rms_eps, c);
  op::linear(ctx, c, w.latent_up, out);  // [T, d]
  if (!w.shared.gate.empty()) {
    Tensor sh = ctx.tensor({T, hp.d_model});
    glu_ffn(x, w.shared, situ_params(hp), ctx, sh);
    op::add(ctx, out, sh, out);
  }
}

}  // namespace k3
