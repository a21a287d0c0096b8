// Backward of y = x · Wᵀ on fp32 master weights: dx += dy · W and dW += dyᵀ · x.
#include "core/error.h"
#include "core/parallel.h"
#include "ops/linear/linear.h"

namespace k3 {

void linear_bwd(const float* x, int64_t T, const Mat& w, const float* dy, float* dx, float* dW) {
  check(w.format == MatFormat::f32,
        "linear backward: weights must be fp32 (training keeps fp32 master weights)");
  const float* W = static_cast<const float*>(w.data);  // [R, C]
  const int64_t R = w.rows, C = w.cols;
  const bool big = T * R * C > (int64_t{1} << 16);
  if (dx != nullptr) {
    parallel_for(T, big, [&](int64_t t) {  // dx[t] += Σ_r dy[t, r] · W[r]
      float* dxt = dx + t * C;
      for (int64_t r = 0; r < R; ++r) {
        const float g = dy[t * R + r];
        const float* wr = W + r * C;
        for (int64_t c = 0; c < C; ++c) dxt[c] += g * wr[c];
      }
    });
  }
  if (dW != nullptr) {
    parallel_for(R, big, [&](int64_t r) {  // dW[r] += Σ_t dy[t, r] · x[t]
      float* dwr = dW + r * C;
      for (int64_t t = 0; t < T; ++t) {
        const float g = dy[t * R + r];
        const float* xt = x + t * C;
        for (int64_t c = 0; c < C; ++c) dwr[c] += g * xt[c];
      }
    });
  }
}

}  // namespace k3
