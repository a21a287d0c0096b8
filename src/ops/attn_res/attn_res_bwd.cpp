// Backward of the AttnRes mix, per token, with ρ_i = (mean(v_i²) + eps)^-½, s_i = ρ_i (v_i·w),
// p = softmax(s), out = Σ p_i v_i:
//   dp_i = dout·v_i,  ds_i = p_i (dp_i − Σ p dp),
//   dv_i += p_i dout + ds_i (ρ_i w − (v_i·w) ρ_i³ v_i / d),  dw += Σ_i ds_i ρ_i v_i.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/attn_res/attn_res.h"

namespace k3 {

void attn_res_mix_bwd(const float* const* cands, AttnResShape s, const float* w, float eps,
                      const float* dout, float* const* dcands, float* dw) {
  const int64_t n = s.n, d = s.d;
  std::vector<double> rho(n), dot(n), p(n), dp(n), dwacc(static_cast<size_t>(d), 0.0);
  for (int64_t t = 0; t < s.T; ++t) {
    const float* g = dout + t * d;
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      const float* v = cands[i] + t * d;
      double ss = 0, vw = 0, vg = 0;
      for (int64_t j = 0; j < d; ++j) {
        ss += double(v[j]) * v[j];
        vw += double(v[j]) * w[j];
        vg += double(v[j]) * g[j];
      }
      rho[i] = 1.0 / std::sqrt(ss / double(d) + eps);
      dot[i] = vw;
      dp[i] = vg;
      p[i] = rho[i] * vw;
      mx = std::max(mx, p[i]);
    }
    double sum = 0, pdp = 0;
    for (int64_t i = 0; i < n; ++i) sum += (p[i] = std::exp(p[i] - mx));
    for (int64_t i = 0; i < n; ++i) pdp += (p[i] /= sum) * dp[i];
    for (int64_t i = 0; i < n; ++i) {
      const float* v = cands[i] + t * d;
      const double ds = p[i] * (dp[i] - pdp);
      const double c = dot[i] * rho[i] * rho[i] * rho[i] / double(d);
      if (dcands[i] != nullptr) {
        float* dv = dcands[i] + t * d;
        for (int64_t j = 0; j < d; ++j)
          dv[j] += static_cast<float>(p[i] * g[j] + ds * (rho[i] * w[j] - c * v[j]));
      }
      for (int64_t j = 0; j < d; ++j) dwacc[j] += ds * rho[i] * v[j];
    }
  }
  if (dw != nullptr) {
    for (int64_t j = 0; j < d; ++j) dw[j] += static_cast<float>(dwacc[j]);
  }
}

}  // namespace k3
