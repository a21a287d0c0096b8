// Backwards of the RMS and L2 norms. For y = w ⊙ x · r with r = (mean(x²) + eps)^-½:
//   dx = r · (w ⊙ dy) − r³/n · x · Σ_i w_i dy_i x_i,   dw += dy ⊙ x · r.
// The gated norm first folds σ(z) into dy; the L2 norm is the same with Σ in place of mean.
#include <cmath>

#include "core/fast_math.h"
#include "ops/norm/norm.h"

namespace k3 {
namespace {

// σ in float (core/fast_math.h: 4e-7 relative), the rest of the gradient in double.
double sigmoid_d(double v) { return sigmoid_fast(static_cast<float>(v)); }

// One row of the RMS norm backward, with gy = w ⊙ dy ⊙ gate given (gate = 1 ungated).
// Returns r so that callers can form dw and dz.
double rms_row_bwd(const float* x, const double* gy, int64_t n, float eps, float* dx) {
  double ss = 0, dot = 0;
  for (int64_t i = 0; i < n; ++i) {
    ss += double(x[i]) * x[i];
    dot += gy[i] * x[i];
  }
  const double r = 1.0 / std::sqrt(ss / double(n) + eps);
  if (dx != nullptr) {
    const double c = r * r * r / double(n) * dot;
    for (int64_t i = 0; i < n; ++i) dx[i] += static_cast<float>(r * gy[i] - c * x[i]);
  }
  return r;
}

}  // namespace

void rms_norm_bwd(const float* x, int64_t rows, int64_t n, const float* w, float eps,
                  const float* dy, float* dx, float* dw) {
  std::vector<double> gy(static_cast<size_t>(n));
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * n;
    const float* dyr = dy + row * n;
    for (int64_t i = 0; i < n; ++i) gy[i] = double(w[i]) * dyr[i];
    const double r = rms_row_bwd(xr, gy.data(), n, eps, dx ? dx + row * n : nullptr);
    if (dw != nullptr) {
      for (int64_t i = 0; i < n; ++i) dw[i] += static_cast<float>(dyr[i] * xr[i] * r);
    }
  }
}

void gated_rms_norm_bwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, const float* dy, float* dx, float* dz, float* dw) {
  std::vector<double> gy(static_cast<size_t>(n));
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * n;
    const float* zr = z + row * n;
    const float* dyr = dy + row * n;
    for (int64_t i = 0; i < n; ++i) gy[i] = double(w[i]) * dyr[i] * sigmoid_d(zr[i]);
    const double r = rms_row_bwd(xr, gy.data(), n, eps, dx ? dx + row * n : nullptr);
    for (int64_t i = 0; i < n; ++i) {
      const double s = sigmoid_d(zr[i]), normed = xr[i] * r;
      if (dz != nullptr)
        dz[row * n + i] += static_cast<float>(dyr[i] * w[i] * normed * s * (1 - s));
      if (dw != nullptr) dw[i] += static_cast<float>(dyr[i] * normed * s);
    }
  }
}

void l2_norm_bwd(const float* x, int64_t rows, int64_t n, float eps, const float* dy, float* dx) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * n;
    const float* dyr = dy + row * n;
    double ss = 0, dot = 0;
    for (int64_t i = 0; i < n; ++i) {
      ss += double(xr[i]) * xr[i];
      dot += double(dyr[i]) * xr[i];
    }
    const double r = 1.0 / std::sqrt(ss + eps), c = r * r * r * dot;
    for (int64_t i = 0; i < n; ++i) dx[row * n + i] += static_cast<float>(r * dyr[i] - c * xr[i]);
  }
}

}  // namespace k3
