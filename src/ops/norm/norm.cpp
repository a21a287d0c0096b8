#include "ops/norm/norm.h"

#include <cmath>

namespace k3 {
namespace {

float inv_rms(const float* x, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
}

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace

void rms_norm(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float s = inv_rms(xr, n, eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * s);
  }
}

void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                    float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const float* zr = z + r * n;
    float* yr = y + r * n;
    const float s = inv_rms(xr, n, eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * s * w[i] * sigmoid(zr[i]);
  }
}

void l2_norm(float* x, int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float s = static_cast<float>(1.0 / std::sqrt(ss + eps));
    for (int64_t i = 0; i < n; ++i) xr[i] *= s;
  }
}

}  // namespace k3
