#include "train/model_train.h"

#include <memory>
#include <string>

#include "core/error.h"
#include "core/fp_env.h"
#include "loader/tensor_table.h"
#include "ops/attn_res/attn_res.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embed/embed.h"
#include "ops/loss/cross_entropy.h"
#include "train/layers_train.h"
#include "train/mtp_train.h"

namespace k3 {
namespace {

using namespace train;  // NOLINT: the training building blocks

// The AttnRes residual stream: every value the prefix sum P takes, and the sealed slots,
// are nodes with gradients. A layer only reads nodes made before it, so walking the layers
// backwards sees each node's gradient complete before it is propagated.
struct Stream {
  std::vector<Buf> val, grad;
  int add(Buf v) {
    grad.push_back(zeros(static_cast<int64_t>(v.size())));
    val.push_back(std::move(v));
    return static_cast<int>(val.size()) - 1;
  }
};

// One AttnRes mix over candidate nodes (sealed slots, then P), with its weights.
struct Mix {
  std::vector<int> cands;
  std::string norm, proj;  // parameter names (w = norm ⊙ proj)
};

Buf mix_fwd(const Stream& st, const Mix& m, const Scope& s, float eps, int64_t T, int64_t d) {
  const Weight norm = s(m.norm), proj = s(m.proj);
  Buf w(static_cast<size_t>(d)), out = zeros(T * d);
  for (int64_t j = 0; j < d; ++j) w[j] = norm.w[j] * proj.w[j];
  std::vector<const float*> c;
  for (int id : m.cands) c.push_back(st.val[id].data());
  kAttnResMixOp.get(s.impl)(c.data(), {static_cast<int64_t>(c.size()), T, d}, w.data(), eps,
                            out.data());
  return out;
}

void mix_back(Stream& st, const Mix& m, const Scope& s, float eps, int64_t T, int64_t d,
              const Buf& dout) {
  const Weight norm = s(m.norm), proj = s(m.proj);
  Buf w(static_cast<size_t>(d)), dw = zeros(d);
  for (int64_t j = 0; j < d; ++j) w[j] = norm.w[j] * proj.w[j];
  std::vector<const float*> c;
  std::vector<float*> dc;
  for (int id : m.cands) {
    c.push_back(st.val[id].data());
    dc.push_back(st.grad[id].data());
  }
  kAttnResMixOp.bwd(c.data(), {static_cast<int64_t>(c.size()), T, d}, w.data(), eps, dout.data(),
                    dc.data(), dw.data());
  for (int64_t j = 0; j < d; ++j) {
    norm.g[j] += dw[j] * proj.w[j];
    proj.g[j] += dw[j] * norm.w[j];
  }
}

struct LayerTape {
  Mix attn_mix;       // empty cands: a = P (layer 0)
  int a_from = -1;    // the node copied into a when there is no mix
  int p_before = -1;  // P before the attention add (-1: P restarts as A after a seal)
  int p_attn = -1;    // P after the attention add
  int p_ffn = -1;     // P after the FFN add
  Mix mlp_mix;
  Buf a, x, A, mm, xf;  // mixes, normalised inputs, attention output
  std::unique_ptr<KdaTape> kda;
  std::unique_ptr<MlaTape> mla;
  std::unique_ptr<MoeTape> moe;
  std::unique_ptr<GluTape> dense;
};

std::vector<int> with_p(const std::vector<int>& sealed, int p) {
  std::vector<int> c = sealed;
  if (p >= 0) c.push_back(p);
  return c;
}

const GluNames kDense{"gate_proj.weight", "up_proj.weight", "down_proj.weight"};

void layer_fwd(const HParams& hp, const Scope& ls, int64_t l, int64_t T, Stream& st,
               std::vector<int>& sealed, int& P, LayerTape& t) {
  const int64_t d = hp.d_model;
  const float eps = hp.rms_eps;
  if (sealed.empty()) {
    t.a_from = P;
    t.a = st.val[P];
  } else {
    t.attn_mix = {with_p(sealed, P), "self_attention_res_norm.weight",
                  "self_attention_res_proj.weight"};
    t.a = mix_fwd(st, t.attn_mix, ls, eps, T, d);
  }
  if (hp.seals_slot(l)) {
    sealed.push_back(P);
    P = -1;
  }
  t.x = rms_fwd(t.a, d, ls("input_layernorm.weight"), eps);
  const Scope attn = ls.sub("self_attn.");
  if (hp.attn_kind[l] == AttnKind::kda) {
    t.kda = std::make_unique<KdaTape>();
    kda_fwd(attn, hp, t.x, T, *t.kda, t.A);
  } else {
    t.mla = std::make_unique<MlaTape>();
    mla_fwd(attn, hp, t.x, T, *t.mla, t.A);
  }
  t.p_before = P;
  Buf p_new = t.A;
  if (P >= 0) kAddOp.get(ls.impl)(st.val[P].data(), t.A.data(), T * d, p_new.data());
  P = t.p_attn = st.add(std::move(p_new));
  t.mlp_mix = {with_p(sealed, P), "mlp_res_norm.weight", "mlp_res_proj.weight"};
  t.mm = mix_fwd(st, t.mlp_mix, ls, eps, T, d);
  t.xf = rms_fwd(t.mm, d, ls("post_attention_layernorm.weight"), eps);
  Buf F;
  if (hp.is_moe_layer(l)) {
    t.moe = std::make_unique<MoeTape>();
    moe_fwd(ls.sub("block_sparse_moe."), hp, t.xf, T, *t.moe, F);
  } else {
    t.dense = std::make_unique<GluTape>();
    glu_fwd(ls.sub("mlp."), kDense, hp, t.xf, T, *t.dense, F);
  }
  kAddOp.get(ls.impl)(st.val[P].data(), F.data(), T * d, F.data());
  P = t.p_ffn = st.add(std::move(F));
}

void layer_back(const HParams& hp, const Scope& ls, int64_t l, int64_t T, Stream& st,
                const LayerTape& t) {
  const int64_t d = hp.d_model;
  const float eps = hp.rms_eps;
  const Buf dF = st.grad[t.p_ffn];  // P_ffn = P_attn + F
  kAddOp.bwd(T * d, dF.data(), st.grad[t.p_attn].data(), nullptr);
  Buf dxf = zeros(T * d), dmm = zeros(T * d);
  if (t.moe) {
    moe_back(ls.sub("block_sparse_moe."), hp, t.xf, T, *t.moe, dF, dxf);
  } else {
    glu_back(ls.sub("mlp."), kDense, hp, t.xf, T, *t.dense, dF, dxf);
  }
  rms_back(t.mm, d, ls("post_attention_layernorm.weight"), eps, dxf, dmm);
  mix_back(st, t.mlp_mix, ls, eps, T, d, dmm);

  const Buf dA = st.grad[t.p_attn];  // P_attn = P_before + A (or A alone)
  if (t.p_before >= 0) kAddOp.bwd(T * d, dA.data(), st.grad[t.p_before].data(), nullptr);
  Buf dx = zeros(T * d), da = zeros(T * d);
  const Scope attn = ls.sub("self_attn.");
  if (t.kda) {
    kda_back(attn, hp, t.x, T, *t.kda, dA, dx);
  } else {
    mla_back(attn, hp, t.x, T, *t.mla, dA, dx);
  }
  rms_back(t.a, d, ls("input_layernorm.weight"), eps, dx, da);
  if (t.attn_mix.cands.empty()) {
    kAddOp.bwd(T * d, da.data(), st.grad[t.a_from].data(), nullptr);
  } else {
    mix_back(st, t.attn_mix, ls, eps, T, d, da);
  }
}

void check_ids(const int64_t* ids, int64_t T, int64_t vocab, const char* what) {
  for (int64_t t = 0; t < T; ++t) {
    check(ids[t] >= 0 && ids[t] < vocab, "training: ", what, " ", ids[t], " at position ", t,
          " is outside the vocabulary [0, ", vocab, ")");
  }
}

}  // namespace

double loss_and_grads(const HParams& hp, const ParamSet& params, const int64_t* tokens,
                      const int64_t* targets, int64_t T, ParamSet& grads, const TrainOptions& opt) {
  const Impl impl = opt.forward;
  const FlushSubnormals flush;  // as the engine's step (core/fp_env.h)
  check(opt.kda_chunk >= 1, "training: the KDA chunk length must be at least 1");
  check(T > 0, "training: a sequence needs at least one token");
  check_ids(tokens, T, hp.vocab, "token");
  check_ids(targets, T, hp.vocab, "target");
  const int64_t d = hp.d_model, V = hp.vocab;
  const Scope model{params, grads, kModelPrefix, impl, opt.kda_chunk};
  const Weight embed = model("embed_tokens.weight");
  Stream st;
  Buf h = zeros(T * d);
  kEmbedOp.get(impl)({hp.vocab, d, MatFormat::f32, embed.w, nullptr}, tokens, T, h.data());
  int P = st.add(std::move(h));
  std::vector<int> sealed;
  std::vector<LayerTape> tapes(static_cast<size_t>(hp.n_layer));
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    layer_fwd(hp, model.sub("layers." + std::to_string(l) + "."), l, T, st, sealed, P, tapes[l]);
  }
  for (int64_t l = 0; opt.router_logits && l < hp.n_layer; ++l) {
    if (tapes[l].moe) opt.router_logits(l, tapes[l].moe->logits.data(), T);
  }
  const Mix out_mix{with_p(sealed, P), "output_attn_res_norm.weight",
                    "output_attn_res_proj.weight"};
  const Buf xo = mix_fwd(st, out_mix, model, hp.rms_eps, T, d);
  const Buf xn = rms_fwd(xo, d, model("norm.weight"), hp.rms_eps);
  const Scope top{params, grads, "", impl, opt.kda_chunk};
  const Weight lm_head = top(kLmHead);
  const Buf logits = linear_fwd(xn, T, lm_head);  // [T, V]
  Buf loss = zeros(T);
  kCrossEntropyOp.get(impl)(logits.data(), targets, T, V, loss.data());
  double mean = 0;
  for (float v : loss) mean += v;
  mean /= double(T);
  if (opt.loss_only) return mean;

  Buf dlogits = zeros(T * V), dxn = zeros(T * d), dxo = zeros(T * d);
  if (hp.n_mtp == 1 && T >= 2) {  // the MTP head reads xo: its gradient lands in dxo first
    MtpTape mt;
    const double mtp = mtp_fwd(hp, model, top, tokens + 1, xo, targets + 1, T - 1, mt);
    if (opt.router_logits && mt.moe) opt.router_logits(hp.n_layer, mt.moe->logits.data(), T - 1);
    mtp_back(hp, model, top, tokens + 1, targets + 1, mt, opt.mtp_weight, dxo);
    mean += opt.mtp_weight * mtp;
  }
  const Buf dloss(static_cast<size_t>(T), static_cast<float>(1.0 / double(T)));
  kCrossEntropyOp.bwd(logits.data(), targets, T, V, dloss.data(), dlogits.data());
  linear_back(xn, T, lm_head, dlogits, &dxn);
  rms_back(xo, d, model("norm.weight"), hp.rms_eps, dxn, dxo);
  mix_back(st, out_mix, model, hp.rms_eps, T, d, dxo);
  for (int64_t l = hp.n_layer - 1; l >= 0; --l) {
    layer_back(hp, model.sub("layers." + std::to_string(l) + "."), l, T, st, tapes[l]);
  }
  kEmbedOp.bwd(tokens, T, d, st.grad[0].data(), embed.g);
  return mean;
}

}  // namespace k3
