// Backward of φ(a, b) = G(a) · U(b), G = β₁ tanh(a/β₁) σ(a), U = β₂ tanh(b/β₂):
//   G' = (1 − tanh²(a/β₁)) σ(a) + β₁ tanh(a/β₁) σ(a)(1 − σ(a)),   U' = 1 − tanh²(b/β₂).
#include <cmath>

#include "ops/situ/situ.h"

namespace k3 {

void situ_glu_bwd(const float* gate, const float* up, int64_t n, SituParams p, const float* dout,
                  float* dgate, float* dup) {
  for (int64_t i = 0; i < n; ++i) {
    const double a = gate[i], b = up[i];
    const double ta = std::tanh(a / p.beta), tb = std::tanh(b / p.linear_beta);
    const double sg = 1.0 / (1.0 + std::exp(-a));
    const double G = p.beta * ta * sg, U = p.linear_beta * tb;
    const double dG = (1.0 - ta * ta) * sg + p.beta * ta * sg * (1.0 - sg);
    if (dgate != nullptr) dgate[i] += static_cast<float>(dout[i] * dG * U);
    if (dup != nullptr) dup[i] += static_cast<float>(dout[i] * G * (1.0 - tb * tb));
  }
}

}  // namespace k3
