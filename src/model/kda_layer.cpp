// KDA sublayer (spec §3): projections, short conv + SiLU, safe decay gate, β, q/k L2 norm,
// the delta-rule core (chunked for prefill, recurrent for decode), gated RMSNorm, o_proj.
#include <cmath>
#include <vector>

#include "model/layers.h"
#include "ops/conv1d/conv1d.h"
#include "ops/kda/kda.h"
#include "ops/norm/norm.h"

namespace k3 {
namespace {

using Buf = std::vector<float>;

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// y [T, P] = SiLU(conv(x · Wᵀ)), updating the conv history.
void project_conv(const float* x, int64_t T, const Mat& w, const Vec& taps,
                  std::vector<float>& hist, int64_t W, float* y) {
  Buf pre(static_cast<size_t>(T * w.rows));  // [T, P]
  linear(x, T, w, pre.data());
  causal_conv1d_silu(pre.data(), taps.data(), hist.data(), {T, w.rows, W}, y);
}

// g [T, H, K] = L · σ(exp(A[h]) · (f + dt_bias))   (spec §3.4, "safe gate")
void decay_gate(const float* x, int64_t T, const KdaWeights& w, const KdaHParams& k, float* g) {
  const int64_t H = k.n_head, K = k.head_dim, P = k.proj_dim();
  Buf fa(static_cast<size_t>(T * w.f_a.rows));  // [T, rank]
  linear(x, T, w.f_a, fa.data());
  linear(fa.data(), T, w.f_b, g);  // f [T, P]
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const float a = std::exp(w.A_log[h]);
      for (int64_t i = 0; i < K; ++i) {
        float& f = g[t * P + h * K + i];
        f = k.gate_lower_bound * sigmoid(a * (f + w.dt_bias[h * K + i]));
      }
    }
  }
}

}  // namespace

void kda_layer(const float* x, int64_t T, const KdaWeights& w, const HParams& hp, KdaState& st,
               Pass pass, float* out) {
  const KdaHParams& kp = hp.kda;
  const int64_t H = kp.n_head, K = kp.head_dim, P = kp.proj_dim(), W = kp.conv_kernel;
  Buf q(T * P), k(T * P), v(T * P), g(T * P), beta(T * H);  // [T, H, K] / [T, H]
  project_conv(x, T, w.q, w.q_conv, st.conv_q, W, q.data());
  project_conv(x, T, w.k, w.k_conv, st.conv_k, W, k.data());
  project_conv(x, T, w.v, w.v_conv, st.conv_v, W, v.data());
  decay_gate(x, T, w, kp, g.data());
  linear(x, T, w.b, beta.data());
  for (float& b : beta) b = sigmoid(b);
  l2_norm(q.data(), T * H, K, 1e-6f);
  l2_norm(k.data(), T * H, K, 1e-6f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(K));
  for (float& e : q) e *= scale;

  Buf o(T * P);  // [T, H, V]
  const KdaInputs in{q.data(), k.data(), v.data(), g.data(), beta.data()};
  if (pass == Pass::prefill) {
    kda_chunked(in, {T, H, K, K}, st.S.data(), o.data());
  } else {
    kda_recurrent(in, {T, H, K, K}, st.S.data(), o.data());
  }
  Buf z(T * P);  // output gate [T, H, V]
  linear(x, T, w.g, z.data());
  gated_rms_norm(o.data(), z.data(), T * H, K, w.o_norm.data(), hp.rms_eps, o.data());
  linear(o.data(), T, w.o, out);
}

}  // namespace k3
