// The device attention sublayers for training, batched over windows: KDA (projections, conv +
// SiLU, safe gate, β, L2 norms, the delta rule from a zero state, gated RMSNorm, o_proj) and
// gated NoPE MLA (LoRA query, latent KV, expanded causal attention, sigmoid gate, o_proj); the
// maths and the order of the backward are train/kda_train.cpp's and train/mla_train.cpp's.
#if defined(K3_HAVE_CUDA)
#include <cmath>

#include "train/cuda/gpu_layers.h"

namespace k3::train::gpu {
namespace {

const char* kProj[3] = {"q_proj.weight", "k_proj.weight", "v_proj.weight"};
const char* kConv[3] = {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"};
constexpr float kL2Eps = 1e-6f;

}  // namespace

void kda_fwd(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, KdaTape& t, DevBuf& out) {
  const KdaHParams& kp = hp.kda;
  const int64_t H = kp.n_head, K = kp.head_dim, P = kp.proj_dim(), W = kp.conv_kernel;
  const int64_t N = r.N();
  for (int i = 0; i < 3; ++i) {
    t.pre[i] = lin(x, N, s(kProj[i]));  // [N, P]
    t.conv[i] = DevBuf(N * P, false);
    conv1d_silu_fwd(t.pre[i].data(), s(kConv[i]).w, r.B, r.T, P, W, t.conv[i].data());
  }
  t.low = lin(x, N, s("f_a_proj.weight"));    // [N, K]
  t.f = lin(t.low, N, s("f_b_proj.weight"));  // [N, P]
  t.g = DevBuf(N * P, false);
  kda_gate_fwd(t.f.data(), s("A_log").w, s("dt_bias").w, N, H, K, kp.gate_lower_bound, t.g.data());
  t.b_logit = lin(x, N, s("b_proj.weight"));  // [N, H]
  t.beta = DevBuf(N * H, false);
  sigmoid_fwd(t.b_logit.data(), N * H, t.beta.data());
  t.qn = DevBuf(N * P, false), t.kn = DevBuf(N * P, false), t.qs = DevBuf(N * P, false);
  l2_norm_fwd(t.conv[0].data(), N * H, K, kL2Eps, t.qn.data());
  l2_norm_fwd(t.conv[1].data(), N * H, K, kL2Eps, t.kn.data());
  scale_fwd(t.qn.data(), N * P, 1.0f / std::sqrt(static_cast<float>(K)), t.qs.data());
  t.states = DevBuf(r.B * H * (r.T + 1) * K * K, false);
  t.o = DevBuf(N * P, false);
  kda_core_fwd(t.qs.data(), t.kn.data(), t.conv[2].data(), t.g.data(), t.beta.data(), r.B, r.T, H,
               K, K, t.states.data(), t.o.data());
  t.z = lin(x, N, s("g_proj.weight"));
  t.y = DevBuf(N * P, false);
  gated_rms_norm_fwd(t.o.data(), t.z.data(), N * H, K, s("o_norm.weight").w, hp.rms_eps,
                     t.y.data());
  out = lin(t.y, N, s("o_proj.weight"));  // [N, d]
}

void kda_back(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, const KdaTape& t,
              const DevBuf& dout, DevBuf& dx) {
  const KdaHParams& kp = hp.kda;
  const int64_t H = kp.n_head, K = kp.head_dim, P = kp.proj_dim(), W = kp.conv_kernel;
  const int64_t N = r.N();
  DevBuf dy(N * P), d_o(N * P), dz(N * P);
  lin_back(t.y, N, s("o_proj.weight"), dout, &dy);
  gated_rms_norm_bwd(t.o.data(), t.z.data(), N * H, K, s("o_norm.weight").w, hp.rms_eps, dy.data(),
                     d_o.data(), dz.data(), s("o_norm.weight").g);
  lin_back(x, N, s("g_proj.weight"), dz, &dx);

  DevBuf dqs(N * P), dkn(N * P), dconv_v(N * P), dg(N * P), dbeta(N * H);
  kda_core_bwd(t.qs.data(), t.kn.data(), t.conv[2].data(), t.g.data(), t.beta.data(), r.B, r.T, H,
               K, K, t.states.data(), d_o.data(), dqs.data(), dkn.data(), dconv_v.data(), dg.data(),
               dbeta.data());
  DevBuf dqn(N * P), dconv[3] = {DevBuf(N * P), DevBuf(N * P), std::move(dconv_v)};
  add_scaled(dqs.data(), N * P, 1.0f / std::sqrt(static_cast<float>(K)), dqn.data());
  l2_norm_bwd(t.conv[0].data(), N * H, K, kL2Eps, dqn.data(), dconv[0].data());
  l2_norm_bwd(t.conv[1].data(), N * H, K, kL2Eps, dkn.data(), dconv[1].data());

  DevBuf db_logit(N * H);
  sigmoid_bwd(t.b_logit.data(), N * H, dbeta.data(), db_logit.data());
  lin_back(x, N, s("b_proj.weight"), db_logit, &dx);

  DevBuf df(N * P), dlow(N * K);
  kda_gate_bwd(t.f.data(), s("A_log").w, s("dt_bias").w, N, H, K, kp.gate_lower_bound, dg.data(),
               df.data(), s("A_log").g, s("dt_bias").g);
  lin_back(t.low, N, s("f_b_proj.weight"), df, &dlow);
  lin_back(x, N, s("f_a_proj.weight"), dlow, &dx);

  for (int i = 0; i < 3; ++i) {
    DevBuf dpre(N * P);
    conv1d_silu_bwd(t.pre[i].data(), s(kConv[i]).w, r.B, r.T, P, W, dconv[i].data(), dpre.data(),
                    s(kConv[i]).g);
    lin_back(x, N, s(kProj[i]), dpre, &dx);
  }
}

void mla_fwd(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, MlaTape& t, DevBuf& out) {
  const MlaHParams& m = hp.mla;
  const int64_t H = m.n_head, Dn = m.qk_nope, Dr = m.qk_rope, Dv = m.v_head, Dc = m.kv_lora_rank;
  const int64_t Dq = Dn + Dr, Dkv = Dn + Dv, Da = Dc + Dr, N = r.N();
  t.cq0 = lin(x, N, s("q_a_proj.weight"));  // [N, Lq]
  t.cq = rms(t.cq0, m.q_lora_rank, s("q_a_layernorm.weight"), hp.mla_lora_eps);
  t.q = lin(t.cq, N, s("q_b_proj.weight"));         // [N, H, Dq]
  t.a = lin(x, N, s("kv_a_proj_with_mqa.weight"));  // [N, Dc + Dr]
  t.c0 = DevBuf(N * Dc, false);
  copy_strided(t.a.data(), Da, t.c0.data(), Dc, N, Dc);
  t.c = rms(t.c0, Dc, s("kv_a_layernorm.weight"), hp.mla_lora_eps);
  const DevBuf kv = lin(t.c, N, s("kv_b_proj.weight"));  // [N, H, Dn + Dv]
  t.k = DevBuf(N * H * Dq, false), t.v = DevBuf(N * H * Dv, false);
  // k_h = [k^N_h ; r] (r, the latent's last Dr columns, shared by the heads); v_h from kv.
  copy_strided(kv.data(), Dkv, t.k.data(), Dq, N * H, Dn);
  for (int64_t h = 0; h < H; ++h) {
    copy_strided(t.a.data() + Dc, Da, t.k.data() + h * Dq + Dn, H * Dq, N, Dr);
  }
  copy_strided(kv.data() + Dn, Dkv, t.v.data(), Dv, N * H, Dv);
  t.probs = DevBuf(r.B * H * r.T * r.T, false);
  t.o = DevBuf(N * H * Dv, false);
  mla_attention_fwd(t.q.data(), t.k.data(), t.v.data(), r.B, r.T, H, Dq, Dv, t.probs.data(),
                    t.o.data());
  t.gate = lin(x, N, s("g_proj.weight"));
  t.og = DevBuf(N * H * Dv, false);
  mul_sigmoid_fwd(t.o.data(), t.gate.data(), N * H * Dv, t.og.data());
  out = lin(t.og, N, s("o_proj.weight"));
}

void mla_back(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, const MlaTape& t,
              const DevBuf& dout, DevBuf& dx) {
  const MlaHParams& m = hp.mla;
  const int64_t H = m.n_head, Dn = m.qk_nope, Dr = m.qk_rope, Dv = m.v_head, Dc = m.kv_lora_rank;
  const int64_t Dq = Dn + Dr, Dkv = Dn + Dv, Da = Dc + Dr, N = r.N(), n = N * H * Dv;
  DevBuf dog(n), d_o(n), dgate(n);
  lin_back(t.og, N, s("o_proj.weight"), dout, &dog);
  mul_sigmoid_bwd(t.o.data(), t.gate.data(), n, dog.data(), d_o.data(), dgate.data());
  lin_back(x, N, s("g_proj.weight"), dgate, &dx);

  DevBuf dq(N * H * Dq), dk(N * H * Dq), dv(n);
  mla_attention_bwd(t.q.data(), t.k.data(), t.v.data(), t.probs.data(), r.B, r.T, H, Dq, Dv,
                    d_o.data(), dq.data(), dk.data(), dv.data());
  DevBuf dkv(N * H * Dkv), da(N * Da);
  copy_strided(dk.data(), Dq, dkv.data(), Dkv, N * H, Dn);
  copy_strided(dv.data(), Dv, dkv.data() + Dn, Dkv, N * H, Dv);
  for (int64_t h = 0; h < H; ++h) {  // the shared rope part sums over the heads, in order
    add_strided(dk.data() + h * Dq + Dn, H * Dq, da.data() + Dc, Da, N, Dr);
  }
  DevBuf dc(N * Dc), dc0(N * Dc);
  lin_back(t.c, N, s("kv_b_proj.weight"), dkv, &dc);
  rms_back(t.c0, Dc, s("kv_a_layernorm.weight"), hp.mla_lora_eps, dc, dc0);
  add_strided(dc0.data(), Dc, da.data(), Da, N, Dc);
  lin_back(x, N, s("kv_a_proj_with_mqa.weight"), da, &dx);

  DevBuf dcq(N * m.q_lora_rank), dcq0(N * m.q_lora_rank);
  lin_back(t.cq, N, s("q_b_proj.weight"), dq, &dcq);
  rms_back(t.cq0, m.q_lora_rank, s("q_a_layernorm.weight"), hp.mla_lora_eps, dcq, dcq0);
  lin_back(x, N, s("q_a_proj.weight"), dcq0, &dx);
}

}  // namespace k3::train::gpu
#endif  // K3_HAVE_CUDA
