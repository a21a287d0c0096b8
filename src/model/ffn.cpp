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
  op::linear(ctx, x, router, logits);
  op::route(ctx, logits, w.router_bias, {E, k, m.renormalize, m.routed_scale}, sel, weight);

  Tensor z = ctx.tensor({T, L}), c = ctx.tensor({T, L});  // latent input; fp32 combine
  op::linear(ctx, x, w.latent_down, z);
  op::moe_experts(ctx, z, sel, weight, w.experts, situ_params(hp), c);  // every expert once
  op::rms_norm(ctx, c, w.latent_norm, hp.rms_eps, c);
  op::linear(ctx, c, w.latent_up, out);  // [T, d]
  if (!w.shared.gate.empty()) {
    Tensor sh = ctx.tensor({T, hp.d_model});
    glu_ffn(x, w.shared, situ_params(hp), ctx, sh);
    op::add(ctx, out, sh, out);
  }
}

}  // namespace k3
