// FFNs for training (spec §6): the SiTU-GLU FFN, and Stable LatentMoE (sigmoid router on the
// full-width input, latent down-projection, routed experts, weighted combine, RMSNorm,
// up-projection, shared experts); and their backwards. The top-k selection is a fixed choice
// in the backward; gradients flow through the selected scores.
#include <algorithm>

#include "ops/moe/moe_combine.h"
#include "ops/moe/router.h"
#include "ops/situ/situ.h"
#include "ops/situ/situ_train.h"
#include "train/layers_train.h"

namespace k3::train {
namespace {

SituParams situ(const HParams& hp) { return {hp.situ_beta, hp.situ_linear_beta}; }

RouterParams router_params(const HParams& hp) {
  return {hp.moe.n_expert, hp.moe.n_used, hp.moe.renormalize, hp.moe.routed_scale};
}

void add_into(Buf& dst, const Buf& src) {
  for (size_t i = 0; i < dst.size(); ++i) dst[i] += src[i];
}

}  // namespace

void glu_fwd(const Scope& s, GluNames n, const HParams& hp, const Buf& x, int64_t rows, GluTape& t,
             Buf& out) {
  t.a = linear_fwd(x, rows, s(n.gate));  // [rows, I]
  t.b = linear_fwd(x, rows, s(n.up));
  t.h = zeros(static_cast<int64_t>(t.a.size()));
  const int64_t m = static_cast<int64_t>(t.a.size());
  if (s.impl == Impl::cpu) {  // the fast float maths; ref keeps the reference forward
    situ_glu_train(t.a.data(), t.b.data(), m, situ(hp), t.h.data());
  } else {
    kSituGluOp.get(s.impl)(t.a.data(), t.b.data(), m, situ(hp), t.h.data());
  }
  out = linear_fwd(t.h, rows, s(n.down));
}

void glu_back(const Scope& s, GluNames n, const HParams& hp, const Buf& x, int64_t rows,
              const GluTape& t, const Buf& dout, Buf& dx) {
  const int64_t m = static_cast<int64_t>(t.a.size());
  Buf dh = zeros(m), da = zeros(m), db = zeros(m);
  linear_back(t.h, rows, s(n.down), dout, &dh);
  kSituGluOp.bwd(t.a.data(), t.b.data(), m, situ(hp), dh.data(), da.data(), db.data());
  linear_back(x, rows, s(n.gate), da, &dx);
  linear_back(x, rows, s(n.up), db, &dx);
}

namespace {
const GluNames kExpertGlu{"w1.weight", "w3.weight", "w2.weight"};
const GluNames kDenseGlu{"gate_proj.weight", "up_proj.weight", "down_proj.weight"};
}  // namespace

void moe_fwd(const Scope& s, const HParams& hp, const Buf& x, int64_t T, MoeTape& t, Buf& out) {
  const MoeHParams& m = hp.moe;
  const int64_t E = m.n_expert, k = m.n_used, L = m.d_latent;
  t.logits = linear_fwd(x, T, s("gate.weight"));  // [T, E]
  t.sel.assign(static_cast<size_t>(T * k), 0);
  t.weight = zeros(T * k);
  kRouterOp.get(s.impl)(t.logits.data(), s("gate.e_score_correction_bias").w, router_params(hp), T,
                        t.sel.data(), t.weight.data());
  t.z = linear_fwd(x, T, s("routed_expert_down_proj.weight"));  // [T, L]
  t.c = zeros(T * L);
  t.experts.assign(static_cast<size_t>(E), {});
  for (int64_t i = 0; i < T * k; ++i) t.experts[t.sel[i]].choices.push_back(i);
  for (int64_t e = 0; e < E; ++e) {
    ExpertTape& et = t.experts[e];
    const int64_t n = static_cast<int64_t>(et.choices.size());
    if (n == 0) continue;
    et.zin = zeros(n * L);
    kGatherChoiceRowsOp.get(s.impl)(t.z.data(), et.choices.data(), n, k, L, et.zin.data());
    glu_fwd(s.sub("experts." + std::to_string(e) + "."), kExpertGlu, hp, et.zin, n, et.glu, et.y);
    kMoeScatterAddOp.get(s.impl)(et.y.data(), et.choices.data(), t.weight.data(), n, k, L,
                                 t.c.data());
  }
  t.cn = rms_fwd(t.c, L, s("routed_expert_norm.weight"), hp.rms_eps);
  out = linear_fwd(t.cn, T, s("routed_expert_up_proj.weight"));  // [T, d]
  if (m.n_shared > 0) {
    Buf sh;
    glu_fwd(s.sub("shared_experts."), kDenseGlu, hp, x, T, t.shared, sh);
    add_into(out, sh);
  }
}

void moe_back(const Scope& s, const HParams& hp, const Buf& x, int64_t T, const MoeTape& t,
              const Buf& dout, Buf& dx) {
  const MoeHParams& m = hp.moe;
  const int64_t E = m.n_expert, k = m.n_used, L = m.d_latent;
  if (m.n_shared > 0) glu_back(s.sub("shared_experts."), kDenseGlu, hp, x, T, t.shared, dout, dx);
  Buf dcn = zeros(T * L), dc = zeros(T * L);
  linear_back(t.cn, T, s("routed_expert_up_proj.weight"), dout, &dcn);
  rms_back(t.c, L, s("routed_expert_norm.weight"), hp.rms_eps, dcn, dc);
  Buf dweight = zeros(T * k), dz = zeros(T * L);
  for (int64_t e = 0; e < E; ++e) {
    const ExpertTape& et = t.experts[e];
    const int64_t n = static_cast<int64_t>(et.choices.size());
    if (n == 0) continue;
    Buf dy = zeros(n * L), dzin = zeros(n * L);
    kMoeScatterAddOp.bwd(et.y.data(), et.choices.data(), t.weight.data(), n, k, L, dc.data(),
                         dy.data(), dweight.data());
    glu_back(s.sub("experts." + std::to_string(e) + "."), kExpertGlu, hp, et.zin, n, et.glu, dy,
             dzin);
    kGatherChoiceRowsOp.bwd(dzin.data(), et.choices.data(), n, k, L, dz.data());
  }
  linear_back(x, T, s("routed_expert_down_proj.weight"), dz, &dx);
  Buf dlogits = zeros(T * E);
  kRouterOp.bwd(t.logits.data(), t.sel.data(), router_params(hp), T, dweight.data(),
                dlogits.data());
  linear_back(x, T, s("gate.weight"), dlogits, &dx);
}

}  // namespace k3::train
