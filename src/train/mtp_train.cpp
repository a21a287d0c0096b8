#include "train/mtp_train.h"

#include <algorithm>
#include <string>

#include "loader/tensor_table.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embed/embed.h"
#include "ops/loss/cross_entropy.h"

namespace k3::train {
namespace {

const GluNames kDense{"gate_proj.weight", "up_proj.weight", "down_proj.weight"};

// rows [n, d] of a and b side by side: [n, 2d].
Buf concat_rows(const Buf& a, const Buf& b, int64_t n, int64_t d) {
  Buf out(static_cast<size_t>(n * 2 * d));
  for (int64_t r = 0; r < n; ++r) {
    std::copy_n(a.data() + r * d, d, out.data() + r * 2 * d);
    std::copy_n(b.data() + r * d, d, out.data() + r * 2 * d + d);
  }
  return out;
}

// The halves [n, d] of rows [n, 2d].
void split_rows(const Buf& in, int64_t n, int64_t d, Buf& a, Buf& b) {
  a = zeros(n * d);
  b = zeros(n * d);
  for (int64_t r = 0; r < n; ++r) {
    std::copy_n(in.data() + r * 2 * d, d, a.data() + r * d);
    std::copy_n(in.data() + r * 2 * d + d, d, b.data() + r * d);
  }
}

}  // namespace

std::string mtp_prefix(const HParams& hp) { return "layers." + std::to_string(hp.n_layer) + "."; }

double mtp_fwd(const HParams& hp, const Scope& model, const Scope& top, const int64_t* next_tokens,
               const Buf& h, const int64_t* next_targets, int64_t n, MtpTape& t) {
  const int64_t d = hp.d_model, V = hp.vocab;
  const float eps = hp.rms_eps;
  const Scope ls = model.sub(mtp_prefix(hp));
  const Weight embed = model("embed_tokens.weight");
  t.n = n;
  t.e = zeros(n * d);
  kEmbedOp.get(model.impl)({V, d, MatFormat::f32, embed.w, nullptr}, next_tokens, n, t.e.data());
  t.h.assign(h.begin(), h.begin() + n * d);
  t.cat = concat_rows(rms_fwd(t.e, d, ls("enorm.weight"), eps),
                      rms_fwd(t.h, d, ls("hnorm.weight"), eps), n, d);
  t.u = linear_fwd(t.cat, n, ls("eh_proj.weight"));
  t.x = rms_fwd(t.u, d, ls("input_layernorm.weight"), eps);
  Buf A;
  mla_fwd(ls.sub("self_attn."), hp, t.x, n, t.mla, A);
  t.u1 = zeros(n * d);
  kAddOp.get(model.impl)(t.u.data(), A.data(), n * d, t.u1.data());
  t.xf = rms_fwd(t.u1, d, ls("post_attention_layernorm.weight"), eps);
  Buf F;
  if (hp.mtp_is_moe()) {
    t.moe = std::make_unique<MoeTape>();
    moe_fwd(ls.sub("block_sparse_moe."), hp, t.xf, n, *t.moe, F);
  } else {
    t.dense = std::make_unique<GluTape>();
    glu_fwd(ls.sub("mlp."), kDense, hp, t.xf, n, *t.dense, F);
  }
  t.u2 = zeros(n * d);
  kAddOp.get(model.impl)(t.u1.data(), F.data(), n * d, t.u2.data());
  t.yn = rms_fwd(t.u2, d, ls("shared_head.norm.weight"), eps);
  t.logits = linear_fwd(t.yn, n, top(kLmHead));  // [n, V]
  Buf loss = zeros(n);
  kCrossEntropyOp.get(model.impl)(t.logits.data(), next_targets, n, V, loss.data());
  double mean = 0;
  for (float v : loss) mean += v;
  return mean / double(n);
}

void mtp_back(const HParams& hp, const Scope& model, const Scope& top, const int64_t* next_tokens,
              const int64_t* next_targets, const MtpTape& t, double weight, Buf& dh) {
  const int64_t d = hp.d_model, V = hp.vocab, n = t.n;
  const float eps = hp.rms_eps;
  const Scope ls = model.sub(mtp_prefix(hp));
  const Buf dloss(static_cast<size_t>(n), static_cast<float>(weight / double(n)));
  Buf dlogits = zeros(n * V), dyn = zeros(n * d), du2 = zeros(n * d);
  kCrossEntropyOp.bwd(t.logits.data(), next_targets, n, V, dloss.data(), dlogits.data());
  linear_back(t.yn, n, top(kLmHead), dlogits, &dyn);
  rms_back(t.u2, d, ls("shared_head.norm.weight"), eps, dyn, du2);
  // u2 = u1 + F
  Buf du1 = du2, dxf = zeros(n * d);
  if (t.moe) {
    moe_back(ls.sub("block_sparse_moe."), hp, t.xf, n, *t.moe, du2, dxf);
  } else {
    glu_back(ls.sub("mlp."), kDense, hp, t.xf, n, *t.dense, du2, dxf);
  }
  rms_back(t.u1, d, ls("post_attention_layernorm.weight"), eps, dxf, du1);
  // u1 = u + A
  Buf du = du1, dx = zeros(n * d);
  mla_back(ls.sub("self_attn."), hp, t.x, n, t.mla, du1, dx);
  rms_back(t.u, d, ls("input_layernorm.weight"), eps, dx, du);
  Buf dcat = zeros(n * 2 * d);
  linear_back(t.cat, n, ls("eh_proj.weight"), du, &dcat);
  Buf den, dhn;
  split_rows(dcat, n, d, den, dhn);
  Buf de = zeros(n * d);
  rms_back(t.e, d, ls("enorm.weight"), eps, den, de);
  rms_back(t.h, d, ls("hnorm.weight"), eps, dhn, dh);  // adds into rows [0, n) of dh
  kEmbedOp.bwd(next_tokens, n, d, de.data(), model("embed_tokens.weight").g);
}

}  // namespace k3::train
