// KDA sublayer for training (spec §3): projections, conv + SiLU, safe gate, β, L2 norms, the
// delta rule from a zero state (the chunked WY form and its backward), gated
// RMSNorm, o_proj; and its backward in reverse order.
#include <cmath>

#include "ops/conv1d/conv1d.h"
#include "ops/elementwise/elementwise.h"
#include "ops/kda/kda.h"
#include "ops/kda/kda_gate.h"
#include "ops/norm/norm.h"
#include "train/layers_train.h"

namespace k3::train {
namespace {

const char* kProj[3] = {"q_proj.weight", "k_proj.weight", "v_proj.weight"};
const char* kConv[3] = {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"};
constexpr float kL2Eps = 1e-6f;

}  // namespace

void kda_fwd(const Scope& s, const HParams& hp, const Buf& x, int64_t T, KdaTape& t, Buf& out) {
  const KdaHParams& kp = hp.kda;
  const int64_t H = kp.n_head, K = kp.head_dim, P = kp.proj_dim(), W = kp.conv_kernel;
  for (int i = 0; i < 3; ++i) {
    t.pre[i] = linear_fwd(x, T, s(kProj[i]));  // [T, P]
    t.conv[i] = zeros(T * P);
    Buf state = zeros(P * (W - 1));  // a fresh sequence
    kConv1dSiluOp.get(s.impl)(t.pre[i].data(), s(kConv[i]).w, state.data(), {T, P, W},
                              t.conv[i].data());
  }
  t.low = linear_fwd(x, T, s("f_a_proj.weight"));    // [T, K]
  t.f = linear_fwd(t.low, T, s("f_b_proj.weight"));  // [T, P]
  t.g = zeros(T * P);
  kKdaGateOp.get(s.impl)(t.f.data(), s("A_log").w, s("dt_bias").w, {T, H, K, kp.gate_lower_bound},
                         t.g.data());
  t.b_logit = linear_fwd(x, T, s("b_proj.weight"));  // [T, H]
  t.beta = zeros(T * H);
  kSigmoidOp.get(s.impl)(t.b_logit.data(), T * H, t.beta.data());
  t.qn = zeros(T * P), t.kn = zeros(T * P), t.qs = zeros(T * P);
  kL2NormOp.get(s.impl)(t.conv[0].data(), T * H, K, kL2Eps, t.qn.data());
  kL2NormOp.get(s.impl)(t.conv[1].data(), T * H, K, kL2Eps, t.kn.data());
  kScaleOp.get(s.impl)(t.qn.data(), T * P, 1.0f / std::sqrt(static_cast<float>(K)), t.qs.data());
  Buf S = zeros(H * K * K);
  t.o = zeros(T * P);
  const KdaInputs core{t.qs.data(), t.kn.data(), t.conv[2].data(), t.g.data(), t.beta.data()};
  if (s.impl == Impl::ref) {
    kKdaChunkedOp.ref(core, {T, H, K, K}, S.data(), t.o.data());  // the double recurrence
  } else {
    t.chunks = kda_chunked_train_fwd(core, {T, H, K, K}, nullptr, nullptr, t.o.data(), s.kda_chunk);
  }
  t.z = linear_fwd(x, T, s("g_proj.weight"));
  t.y = zeros(T * P);
  kGatedRmsNormOp.get(s.impl)(t.o.data(), t.z.data(), T * H, K, s("o_norm.weight").w, hp.rms_eps,
                              t.y.data());
  out = linear_fwd(t.y, T, s("o_proj.weight"));  // [T, d]
}

void kda_back(const Scope& s, const HParams& hp, const Buf& x, int64_t T, const KdaTape& t,
              const Buf& dout, Buf& dx) {
  const KdaHParams& kp = hp.kda;
  const int64_t H = kp.n_head, K = kp.head_dim, P = kp.proj_dim(), W = kp.conv_kernel;
  Buf dy = zeros(T * P), d_o = zeros(T * P), dz = zeros(T * P);
  linear_back(t.y, T, s("o_proj.weight"), dout, &dy);
  kGatedRmsNormOp.bwd(t.o.data(), t.z.data(), T * H, K, s("o_norm.weight").w, hp.rms_eps, dy.data(),
                      d_o.data(), dz.data(), s("o_norm.weight").g);
  linear_back(x, T, s("g_proj.weight"), dz, &dx);

  Buf dqs = zeros(T * P), dkn = zeros(T * P), dconv_v = zeros(T * P), dg = zeros(T * P);
  Buf dbeta = zeros(T * H);
  const KdaGrads dcore{dqs.data(), dkn.data(), dconv_v.data(), dg.data(), dbeta.data()};
  if (t.chunks) {  // the cpu forward kept its chunks
    kda_chunked_bwd_saved(*t.chunks, {T, H, K, K}, d_o.data(), dcore);
  } else {
    kda_chunked_bwd({t.qs.data(), t.kn.data(), t.conv[2].data(), t.g.data(), t.beta.data()},
                    {T, H, K, K}, nullptr, d_o.data(), dcore, s.kda_chunk);
  }
  Buf dqn = zeros(T * P), dconv[3] = {zeros(T * P), zeros(T * P), std::move(dconv_v)};
  kScaleOp.bwd(T * P, 1.0f / std::sqrt(static_cast<float>(K)), dqs.data(), dqn.data());
  kL2NormOp.bwd(t.conv[0].data(), T * H, K, kL2Eps, dqn.data(), dconv[0].data());
  kL2NormOp.bwd(t.conv[1].data(), T * H, K, kL2Eps, dkn.data(), dconv[1].data());

  Buf db_logit = zeros(T * H);
  kSigmoidOp.bwd(t.b_logit.data(), T * H, dbeta.data(), db_logit.data());
  linear_back(x, T, s("b_proj.weight"), db_logit, &dx);

  Buf df = zeros(T * P), dlow = zeros(T * K);
  kKdaGateOp.bwd(t.f.data(), s("A_log").w, s("dt_bias").w, {T, H, K, kp.gate_lower_bound},
                 dg.data(), df.data(), s("A_log").g, s("dt_bias").g);
  linear_back(t.low, T, s("f_b_proj.weight"), df, &dlow);
  linear_back(x, T, s("f_a_proj.weight"), dlow, &dx);

  for (int i = 0; i < 3; ++i) {
    Buf dpre = zeros(T * P);
    kConv1dSiluOp.bwd(t.pre[i].data(), s(kConv[i]).w, nullptr, {T, P, W}, dconv[i].data(),
                      dpre.data(), s(kConv[i]).g);
    linear_back(x, T, s(kProj[i]), dpre, &dx);
  }
}

}  // namespace k3::train
