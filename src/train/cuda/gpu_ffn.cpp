// The device FFNs for training, batched over windows: the SiTU-GLU FFN and Stable LatentMoE
// (sigmoid router, latent down-projection, routed experts, weighted combine, RMSNorm,
// up-projection, shared experts), with the maths and backward order of train/ffn_train.cpp.
// The routed experts' rows are grouped expert by expert on the host from the router's choices
// (one small copy each way per MoE layer), so each expert runs its GLU as plain products over
// a contiguous slice.
#if defined(K3_HAVE_CUDA)
#include <string>

#include "core/error.h"
#include "train/cuda/gpu_layers.h"

namespace k3::train::gpu {
namespace {

SituParams situ(const HParams& hp) { return {hp.situ_beta, hp.situ_linear_beta}; }

RouterParams router_params(const HParams& hp) {
  return {hp.moe.n_expert, hp.moe.n_used, hp.moe.renormalize, hp.moe.routed_scale};
}

const GluNames kExpertGlu{"w1.weight", "w3.weight", "w2.weight"};
const GluNames kDenseGlu{"gate_proj.weight", "up_proj.weight", "down_proj.weight"};

// The flat choices t·k + j grouped by expert (ascending flat index inside an expert, as the
// CPU's per-expert lists): order's tokens (order[i] / k) and each choice's position in it.
struct ExpertOrder {
  std::vector<int64_t> count, token, inv;
};

ExpertOrder group_by_expert(const std::vector<int32_t>& sel, int64_t E, int64_t k) {
  const int64_t n = static_cast<int64_t>(sel.size());
  ExpertOrder o;
  o.count.assign(size_t(E), 0);
  for (int32_t e : sel) ++o.count[size_t(e)];
  std::vector<int64_t> next(size_t(E), 0);
  for (int64_t e = 1; e < E; ++e) next[size_t(e)] = next[size_t(e - 1)] + o.count[size_t(e - 1)];
  o.token.resize(size_t(n));
  o.inv.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = next[size_t(sel[size_t(i)])]++;
    o.token[size_t(pos)] = i / k;
    o.inv[size_t(i)] = pos;
  }
  return o;
}

template <typename T>
DevArray<T> upload_vec(const std::vector<T>& h) {
  DevArray<T> d(static_cast<int64_t>(h.size()), false);
  if (!h.empty()) to_dev(d.data(), h.data(), d.bytes());
  return d;
}

}  // namespace

void glu_fwd(const Scope& s, GluNames n, const HParams& hp, const DevBuf& x, int64_t rows,
             GluTape& t, DevBuf& out) {
  t.a = lin(x, rows, s(n.gate));  // [rows, I]
  t.b = lin(x, rows, s(n.up));
  t.h = DevBuf(t.a.size(), false);
  situ_glu_fwd(t.a.data(), t.b.data(), t.a.size(), situ(hp), t.h.data());
  out = lin(t.h, rows, s(n.down));
}

void glu_back(const Scope& s, GluNames n, const HParams& hp, const DevBuf& x, int64_t rows,
              const GluTape& t, const DevBuf& dout, DevBuf& dx) {
  const int64_t m = t.a.size();
  DevBuf dh(m), da(m), db(m);
  lin_back(t.h, rows, s(n.down), dout, &dh);
  gpu::situ_glu_bwd(t.a.data(), t.b.data(), m, situ(hp), dh.data(), da.data(), db.data());
  lin_back(x, rows, s(n.gate), da, &dx);
  lin_back(x, rows, s(n.up), db, &dx);
}

void moe_fwd(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, MoeTape& t, DevBuf& out) {
  const MoeHParams& m = hp.moe;
  const int64_t E = m.n_expert, k = m.n_used, L = m.d_latent, I = m.d_expert, N = r.N(), n = N * k;
  check(s("experts.0.w1.weight").rows == I, "training on the GPU: expert width is not ",
        "moe_intermediate_size");
  t.logits = lin(x, N, s("gate.weight"));  // [N, E]
  t.sel = DevArray<int32_t>(n, false);
  t.weight = DevBuf(n, false);
  router_fwd(t.logits.data(), s("gate.e_score_correction_bias").w, router_params(hp), N,
             t.sel.data(), t.weight.data());
  std::vector<int32_t> sel(static_cast<size_t>(n));
  to_host(sel.data(), t.sel.data(), t.sel.bytes());
  const ExpertOrder order = group_by_expert(sel, E, k);
  t.count = order.count;
  t.inv = upload_vec(order.inv);
  const DevArray<int64_t> token = upload_vec(order.token);

  t.z = lin(x, N, s("routed_expert_down_proj.weight"));  // [N, L]
  t.zin = DevBuf(n * L, false);
  gather_rows_fwd(t.z.data(), token.data(), n, L, t.zin.data());
  GluTape& g = t.experts;
  g.a = DevBuf(n * I, false), g.b = DevBuf(n * I, false), g.h = DevBuf(n * I, false);
  t.y = DevBuf(n * L, false);
  for (int64_t e = 0, off = 0; e < E; off += t.count[size_t(e)], ++e) {
    const int64_t ne = t.count[size_t(e)];
    if (ne == 0) continue;
    const Scope es = s.sub("experts." + std::to_string(e) + ".");
    const float* zin = t.zin.data() + off * L;
    linear_fwd(zin, ne, es("w1.weight").w, I, L, g.a.data() + off * I);
    linear_fwd(zin, ne, es("w3.weight").w, I, L, g.b.data() + off * I);
  }
  situ_glu_fwd(g.a.data(), g.b.data(), n * I, situ(hp), g.h.data());
  for (int64_t e = 0, off = 0; e < E; off += t.count[size_t(e)], ++e) {
    const int64_t ne = t.count[size_t(e)];
    if (ne == 0) continue;
    const Scope es = s.sub("experts." + std::to_string(e) + ".");
    linear_fwd(g.h.data() + off * I, ne, es("w2.weight").w, L, I, t.y.data() + off * L);
  }
  t.c = DevBuf(N * L);
  moe_combine_fwd(t.y.data(), t.inv.data(), t.weight.data(), N, k, L, t.c.data());
  t.cn = rms(t.c, L, s("routed_expert_norm.weight"), hp.rms_eps);
  out = lin(t.cn, N, s("routed_expert_up_proj.weight"));  // [N, d]
  if (m.n_shared > 0) {
    DevBuf sh;
    glu_fwd(s.sub("shared_experts."), kDenseGlu, hp, x, N, t.shared, sh);
    add_fwd(out.data(), sh.data(), out.size(), out.data());
  }
}

void moe_back(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, const MoeTape& t,
              const DevBuf& dout, DevBuf& dx) {
  const MoeHParams& m = hp.moe;
  const int64_t E = m.n_expert, k = m.n_used, L = m.d_latent, I = m.d_expert, N = r.N(), n = N * k;
  if (m.n_shared > 0) glu_back(s.sub("shared_experts."), kDenseGlu, hp, x, N, t.shared, dout, dx);
  DevBuf dcn(N * L), dc(N * L);
  lin_back(t.cn, N, s("routed_expert_up_proj.weight"), dout, &dcn);
  rms_back(t.c, L, s("routed_expert_norm.weight"), hp.rms_eps, dcn, dc);
  DevBuf dweight(n), dy(n * L), dzin(n * L);
  moe_combine_bwd(t.y.data(), t.inv.data(), t.weight.data(), N, k, L, dc.data(), dy.data(),
                  dweight.data());
  const GluTape& g = t.experts;
  DevBuf dh(n * I), da(n * I), db(n * I);
  for (int64_t e = 0, off = 0; e < E; off += t.count[size_t(e)], ++e) {
    const int64_t ne = t.count[size_t(e)];
    if (ne == 0) continue;
    const GWeight w2 = s.sub("experts." + std::to_string(e) + ".")("w2.weight");
    linear_bwd(g.h.data() + off * I, ne, w2.w, L, I, dy.data() + off * L, dh.data() + off * I,
               w2.g);
  }
  gpu::situ_glu_bwd(g.a.data(), g.b.data(), n * I, situ(hp), dh.data(), da.data(), db.data());
  for (int64_t e = 0, off = 0; e < E; off += t.count[size_t(e)], ++e) {
    const int64_t ne = t.count[size_t(e)];
    if (ne == 0) continue;
    const Scope es = s.sub("experts." + std::to_string(e) + ".");
    const GWeight w1 = es("w1.weight"), w3 = es("w3.weight");
    const float* zin = t.zin.data() + off * L;
    linear_bwd(zin, ne, w1.w, I, L, da.data() + off * I, dzin.data() + off * L, w1.g);
    linear_bwd(zin, ne, w3.w, I, L, db.data() + off * I, dzin.data() + off * L, w3.g);
  }
  DevBuf dz(N * L);
  gather_choices_bwd(dzin.data(), t.inv.data(), N, k, L, dz.data());
  lin_back(x, N, s("routed_expert_down_proj.weight"), dz, &dx);
  DevBuf dlogits(N * E);
  router_bwd(t.logits.data(), t.sel.data(), router_params(hp), N, dweight.data(), dlogits.data());
  lin_back(x, N, s("gate.weight"), dlogits, &dx);
}

}  // namespace k3::train::gpu
#endif  // K3_HAVE_CUDA
