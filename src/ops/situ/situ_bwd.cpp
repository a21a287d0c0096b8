// Backward of φ(a, b) = G(a) · U(b), G = β₁ tanh(a/β₁) σ(a), U = β₂ tanh(b/β₂):
//   G' = (1 − tanh²(a/β₁)) σ(a) + β₁ tanh(a/β₁) σ(a)(1 − σ(a)),   U' = 1 − tanh²(b/β₂).
#include "core/fast_math.h"
#include "ops/situ/situ.h"

namespace k3 {

// In float with the vectorisable tanh / sigmoid of core/fast_math.h (4e-7 relative): the
// gradient's own fp32 rounding is of the same order.
void situ_glu_bwd(const float* gate, const float* up, int64_t n, SituParams p, const float* dout,
                  float* dgate, float* dup) {
  const float b1 = p.beta, b2 = p.linear_beta, inv_b1 = 1.0f / b1, inv_b2 = 1.0f / b2;
  // ∂/∂gate and ∂/∂up of dout[i] · φ(gate[i], up[i]); branch-free so the loops vectorise.
  auto grads = [&](int64_t i, float& dg, float& du) {
    const float a = gate[i], b = up[i];
    const float ta = tanh_fast(a * inv_b1), tb = tanh_fast(b * inv_b2);
    const float sg = sigmoid_fast(a);
    const float G = b1 * ta * sg, U = b2 * tb;
    const float dG = (1.0f - ta * ta) * sg + b1 * ta * sg * (1.0f - sg);
    dg = dout[i] * dG * U;
    du = dout[i] * G * (1.0f - tb * tb);
  };
  float dg = 0, du = 0;
  if (dgate != nullptr && dup != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      grads(i, dg, du);
      dgate[i] += dg;
      dup[i] += du;
    }
  } else if (dgate != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      grads(i, dg, du);
      dgate[i] += dg;
    }
  } else if (dup != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      grads(i, dg, du);
      dup[i] += du;
    }
  }
}

}  // namespace k3
