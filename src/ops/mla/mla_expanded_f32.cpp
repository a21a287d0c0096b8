// The expanded MLA attention (mla.h) in matrix form: per head and tile of kQueryTile queries,
// the scores are one product on the dispatched fp32 GEMM (core/gemm.h), the causal softmax runs
// over their rows, and the output is a second product, with the values. Every output is
// computed by one task in a fixed order: results do not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "core/fast_math.h"
#include "core/gemm.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/mla/mla.h"

namespace k3 {
namespace {

constexpr int64_t kQueryTile = 32;

// p[0, n) ← softmax(scale · p[0, n)); p[n, width) ← 0 (keys the query may not see).
void causal_softmax_row(float* p, int64_t n, int64_t width, float scale) {
  float mx = p[0];
  for (int64_t j = 1; j < n; ++j) mx = std::max(mx, p[j]);
  for (int64_t j = 0; j < n; ++j) p[j] = exp_fast((p[j] - mx) * scale);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += p[j];
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) p[j] *= inv;
  std::fill(p + n, p + width, 0.0f);
}

}  // namespace

void mla_attention_expanded(const float* q, const float* k, const float* v, MlaShape s, float* o) {
  const int64_t H = s.H, Dq = s.Dn + s.Dr, Dv = s.Dv;
  // Scores are scaled inside the softmax (max taken on the raw scores: the scale is positive).
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dq));
  const int64_t tiles = (s.T + kQueryTile - 1) / kQueryTile;
  parallel_for(H * tiles, H * tiles > 1, [&](int64_t task) {
    const int64_t h = task % H, t0 = (task / H) * kQueryTile;
    const int64_t m = std::min(kQueryTile, s.T - t0);
    const int64_t nk = s.n_past + t0 + m;  // keys the tile's last query sees
    float* kt = thread_scratch<float, struct MlaKtTag>(static_cast<size_t>(Dq * nk));  // [Dq, nk]
    float* p = thread_scratch<float, struct MlaPTag>(static_cast<size_t>(m * nk));     // [m, nk]
    for (int64_t tau = 0; tau < nk; ++tau) {
      const float* kh = k + (tau * H + h) * Dq;
      for (int64_t i = 0; i < Dq; ++i) kt[i * nk + tau] = kh[i];
    }
    std::fill_n(p, m * nk, 0.0f);
    gemm_acc(m, nk, Dq, {q + (t0 * H + h) * Dq, H * Dq, 1}, kt, nk, p, nk);  // q kᵀ
    for (int64_t r = 0; r < m; ++r)
      causal_softmax_row(p + r * nk, s.n_past + t0 + r + 1, nk, scale);
    float* oh = o + (t0 * H + h) * Dv;  // rows t0 … t0+m-1 of head h, stride H*Dv
    for (int64_t r = 0; r < m; ++r) std::fill_n(oh + r * H * Dv, Dv, 0.0f);
    gemm_acc(m, Dv, nk, {p, nk, 1}, v + h * Dv, H * Dv, oh, H * Dv);  // P v
  });
}

}  // namespace k3
