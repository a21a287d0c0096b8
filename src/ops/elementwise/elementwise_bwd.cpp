// Backwards of the element-wise ops (each adds into its input gradients).
#include <cmath>

#include "core/fast_math.h"
#include "ops/elementwise/elementwise.h"

namespace k3 {
namespace {
// σ in float (core/fast_math.h: 4e-7 relative), the rest of the gradient in double.
double sigmoid_d(double v) { return sigmoid_fast(static_cast<float>(v)); }
}  // namespace

void sigmoid_bwd(const float* x, int64_t n, const float* dy, float* dx) {
  for (int64_t i = 0; i < n; ++i) {  // σ' = σ (1 − σ)
    const double s = sigmoid_d(x[i]);
    dx[i] += static_cast<float>(dy[i] * s * (1.0 - s));
  }
}

void scale_bwd(int64_t n, float s, const float* dy, float* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * s;
}

void add_bwd(int64_t n, const float* dy, float* da, float* db) {
  for (int64_t i = 0; i < n; ++i) {
    if (da != nullptr) da[i] += dy[i];
    if (db != nullptr) db[i] += dy[i];
  }
}

void mul_sigmoid_bwd(const float* x, const float* gate, int64_t n, const float* dy, float* dx,
                     float* dgate) {
  for (int64_t i = 0; i < n; ++i) {  // y = x σ(g): dx = dy σ(g), dg = dy x σ(g)(1 − σ(g))
    const double s = sigmoid_d(gate[i]);
    if (dx != nullptr) dx[i] += static_cast<float>(dy[i] * s);
    if (dgate != nullptr) dgate[i] += static_cast<float>(dy[i] * x[i] * s * (1.0 - s));
  }
}

}  // namespace k3
