// Backward of the causal depthwise conv + SiLU. With a[t, c] = Σ_j w[c, j] · x[t-(W-1)+j, c]
// (the history before t = 0) and y = SiLU(a):
//   da = dy · σ(a)(1 + a(1 − σ(a))),  dx[τ, c] += Σ_j w[c, j] · da[τ+(W-1)-j, c],
//   dw[c, j] += Σ_t da[t, c] · x[t-(W-1)+j, c].
// Token by token over contiguous channel rows (the channels of a row vectorise); the
// pre-activation and the weight sums in double, σ in float (core/fast_math.h, 4e-7 relative).
#include <vector>

#include "core/fast_math.h"
#include "ops/conv1d/conv1d.h"

namespace k3 {

void causal_conv1d_silu_bwd(const float* x, const float* w, const float* state, Conv1dShape s,
                            const float* dy, float* dx, float* dw) {
  const int64_t T = s.T, C = s.C, W = s.W;
  // Row p of the input [C] (p < 0 reads the history, oldest first), into row.
  std::vector<double> row(static_cast<size_t>(C)), a(static_cast<size_t>(C)),
      da(static_cast<size_t>(C)), dw_acc(static_cast<size_t>(C * W), 0.0);
  auto input_row = [&](int64_t p) {
    for (int64_t c = 0; c < C; ++c) {
      row[c] = p >= 0             ? double(x[p * C + c])
               : state == nullptr ? 0.0
                                  : double(state[c * (W - 1) + (W - 1) + p]);
    }
  };
  for (int64_t t = 0; t < T; ++t) {
    std::fill(a.begin(), a.end(), 0.0);  // recompute the pre-activation row
    for (int64_t j = 0; j < W; ++j) {
      input_row(t - (W - 1) + j);
      for (int64_t c = 0; c < C; ++c) a[c] += double(w[c * W + j]) * row[c];
    }
    for (int64_t c = 0; c < C; ++c) {
      const double sg = sigmoid_fast(static_cast<float>(a[c]));
      da[c] = dy[t * C + c] * sg * (1.0 + a[c] * (1.0 - sg));
    }
    for (int64_t j = 0; j < W; ++j) {
      const int64_t p = t - (W - 1) + j;
      if (dx != nullptr && p >= 0) {
        for (int64_t c = 0; c < C; ++c) dx[p * C + c] += static_cast<float>(w[c * W + j] * da[c]);
      }
      if (dw != nullptr) {
        input_row(p);
        for (int64_t c = 0; c < C; ++c) dw_acc[c * W + j] += da[c] * row[c];
      }
    }
  }
  if (dw != nullptr) {
    for (int64_t i = 0; i < C * W; ++i) dw[i] += static_cast<float>(dw_acc[i]);
  }
}

}  // namespace k3
