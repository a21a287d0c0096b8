// Backward of the causal depthwise conv + SiLU. With a[t, c] = Σ_j w[c, j] · x[t-(W-1)+j, c]
// (the history before t = 0) and y = SiLU(a):
//   da = dy · σ(a)(1 + a(1 − σ(a))),  dx[τ, c] += Σ_j w[c, j] · da[τ+(W-1)-j, c],
//   dw[c, j] += Σ_t da[t, c] · x[t-(W-1)+j, c].
#include <cmath>
#include <vector>

#include "core/fast_math.h"
#include "ops/conv1d/conv1d.h"

namespace k3 {

void causal_conv1d_silu_bwd(const float* x, const float* w, const float* state, Conv1dShape s,
                            const float* dy, float* dx, float* dw) {
  const int64_t T = s.T, C = s.C, W = s.W;
  // The input at position p (p < 0 reads the history, oldest first).
  auto input = [&](int64_t p, int64_t c) -> double {
    if (p >= 0) return x[p * C + c];
    return state == nullptr ? 0.0 : state[c * (W - 1) + (W - 1) + p];
  };
  std::vector<double> da(static_cast<size_t>(T));
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t t = 0; t < T; ++t) {  // recompute the pre-activation
      double a = 0;
      for (int64_t j = 0; j < W; ++j) a += double(w[c * W + j]) * input(t - (W - 1) + j, c);
      const double sg = sigmoid_fast(static_cast<float>(a));  // 4e-7 relative
      da[t] = dy[t * C + c] * sg * (1.0 + a * (1.0 - sg));
    }
    for (int64_t j = 0; j < W; ++j) {
      double dwj = 0;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t p = t - (W - 1) + j;
        if (dx != nullptr && p >= 0) dx[p * C + c] += static_cast<float>(w[c * W + j] * da[t]);
        dwj += da[t] * input(p, c);
      }
      if (dw != nullptr) dw[c * W + j] += static_cast<float>(dwj);
    }
  }
}

}  // namespace k3
