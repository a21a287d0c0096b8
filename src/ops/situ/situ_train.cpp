#include "ops/situ/situ_train.h"

#include "core/fast_math.h"

namespace k3 {

void situ_glu_train(const float* gate, const float* up, int64_t n, SituParams p, float* out) {
  const float inv_b1 = 1.0f / p.beta, inv_b2 = 1.0f / p.linear_beta;
  for (int64_t i = 0; i < n; ++i) {
    const float a = gate[i], b = up[i];
    const float g = p.beta * tanh_fast(a * inv_b1) * sigmoid_fast(a);
    out[i] = g * (p.linear_beta * tanh_fast(b * inv_b2));
  }
}

}  // namespace k3
