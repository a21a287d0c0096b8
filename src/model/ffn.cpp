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

// out [T, w.down.rows] = down(φ(a, b)) for a = gate·x, b = up·x (a is overwritten).
void glu_down(const Tensor& a, const Tensor& b, const FfnWeights& w, SituParams p, Ctx& ctx,
              const Tensor& out) {
  op::situ_glu(ctx, a, b, p, a);
  op::linear(ctx, a, w.down, out);
}

// out [T, w.down.rows] = down(φ(gate·x, up·x)); x [T, w.gate.cols].
void glu_ffn(const Tensor& x, const FfnWeights& w, SituParams p, Ctx& ctx, const Tensor& out) {
  CtxScope scope(ctx);
  const int64_t T = x.dim(0), I = w.gate.rows;
  Tensor a = ctx.tensor({T, I}), b = ctx.tensor({T, I});
  op::linear_multi(ctx, x, {&w.gate, &w.up}, {a, b});
  glu_down(a, b, w, p, ctx, out);
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
  Mat router = w.router;
  router.keep_fp32 = true;  // as llama.cpp's F32 router: bf16 rounding would flip near-ties
  Tensor z = ctx.tensor({T, L}), c = ctx.tensor({T, L});  // latent input; fp32 combine
  // Every projection of x at once: router logits, latent input, the shared experts' gate/up.
  const bool shared = !w.shared.gate.empty();
  const int64_t Is = shared ? w.shared.gate.rows : 0;
  Tensor sa = ctx.tensor({T, Is}), sb = ctx.tensor({T, Is});
  if (shared) {
    op::linear_multi(ctx, x, {&router, &w.latent_down, &w.shared.gate, &w.shared.up},
                     {logits, z, sa, sb});
  } else {
    op::linear_multi(ctx, x, {&router, &w.latent_down}, {logits, z});
  }
  op::route(ctx, logits, w.router_bias, {E, k, m.renormalize, m.routed_scale}, sel, weight);
  op::moe_experts(ctx, z, sel, weight, w.experts, situ_params(hp), c);  // every expert once
  op::rms_norm(ctx, c, w.latent_norm, hp.rms_eps, c);
  op::linear(ctx, c, w.latent_up, out);  // [T, d]
  if (shared) {
    Tensor sh = ctx.tensor({T, hp.d_model});
    glu_down(sa, sb, w.shared, situ_params(hp), ctx, sh);
    op::add(ctx, out, sh, out);
  }
}

}  // namespace k3
