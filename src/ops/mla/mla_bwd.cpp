// Backward of the expanded (causal softmax) attention, per head h and query t over the keys
// τ ≤ n_past + t, with p = softmax(scale · q·k_τ) and o = Σ p_τ v_τ:
//   dp_τ = do·v_τ,  ds_τ = p_τ (dp_τ − Σ p dp),  dq += scale Σ ds_τ k_τ,
//   dk_τ += scale · ds_τ q,  dv_τ += p_τ do.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "ops/mla/mla.h"

namespace k3 {

void mla_attention_expanded_bwd(const float* q, const float* k, const float* v, MlaShape s,
                                const float* d_o, float* dq, float* dk, float* dv) {
  const int64_t H = s.H, Dq = s.Dn + s.Dr, Dv = s.Dv, S = s.n_past + s.T;
  const double scale = 1.0 / std::sqrt(double(Dq));
  // Heads write disjoint slices of dq/dk/dv.
  parallel_for(H, s.T * S * Dq > 8192, [&](int64_t h) {
    std::vector<double> p(static_cast<size_t>(S)), dp(static_cast<size_t>(S));
    for (int64_t t = 0; t < s.T; ++t) {
      const float* qh = q + (t * H + h) * Dq;
      const float* doh = d_o + (t * H + h) * Dv;
      const int64_t n = s.n_past + t + 1;
      double mx = -INFINITY, sum = 0;
      for (int64_t tau = 0; tau < n; ++tau) {
        const float* kh = k + (tau * H + h) * Dq;
        double acc = 0;
        for (int64_t i = 0; i < Dq; ++i) acc += double(qh[i]) * kh[i];
        p[tau] = acc * scale;
        mx = std::max(mx, p[tau]);
      }
      for (int64_t tau = 0; tau < n; ++tau) sum += (p[tau] = std::exp(p[tau] - mx));
      double pdp = 0;
      for (int64_t tau = 0; tau < n; ++tau) {
        p[tau] /= sum;
        const float* vh = v + (tau * H + h) * Dv;
        double acc = 0;
        for (int64_t j = 0; j < Dv; ++j) acc += double(doh[j]) * vh[j];
        dp[tau] = acc;
        pdp += p[tau] * acc;
      }
      for (int64_t tau = 0; tau < n; ++tau) {
        const double ds = p[tau] * (dp[tau] - pdp) * scale;
        const float* kh = k + (tau * H + h) * Dq;
        if (dq != nullptr) {
          for (int64_t i = 0; i < Dq; ++i)
            dq[(t * H + h) * Dq + i] += static_cast<float>(ds * kh[i]);
        }
        if (dk != nullptr) {
          for (int64_t i = 0; i < Dq; ++i)
            dk[(tau * H + h) * Dq + i] += static_cast<float>(ds * qh[i]);
        }
        if (dv != nullptr) {
          for (int64_t j = 0; j < Dv; ++j)
            dv[(tau * H + h) * Dv + j] += static_cast<float>(p[tau] * doh[j]);
        }
      }
    }
  });
}

}  // namespace k3
