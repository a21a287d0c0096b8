#include "ops/norm/norm.h"

#include <cmath>

#include "backend/cuda/launchers.h"
#include "core/fast_math.h"
#include "core/parallel.h"

namespace k3 {
namespace {

float inv_rms(const float* x, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
}

// Rows are split over the workers above this many elements (a prefill's norms; a decode
// step's few rows stay on the caller).
constexpr int64_t kParallelMin = int64_t{1} << 15;

bool rows_worth_splitting(int64_t rows, int64_t n) { return rows > 1 && rows * n > kParallelMin; }

// Σ x² of one row, in double (the references).
double sum_sq(const float* x, int64_t n) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return ss;
}

}  // namespace

void rms_norm(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y) {
  parallel_for(rows, rows_worth_splitting(rows, n), [&](int64_t r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float s = inv_rms(xr, n, eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * s);
  });
}

// The gate's sigmoid through fast_math.h's e^x (within 4e-7 of the exact one; libm's expf is
// a scalar call, and this norm ran single-threaded at ~13% of a K3-small prefill).
void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                    float eps, float* y) {
  parallel_for(rows, rows_worth_splitting(rows, n), [&](int64_t r) {
    const float* xr = x + r * n;
    const float* zr = z + r * n;
    float* yr = y + r * n;
    const float s = inv_rms(xr, n, eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * s * w[i] * sigmoid_fast(zr[i]);
  });
}

void l2_norm(const float* x, int64_t rows, int64_t n, float eps, float* y) {
  parallel_for(rows, rows_worth_splitting(rows, n), [&](int64_t r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float s = static_cast<float>(1.0 / std::sqrt(ss + eps));
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * s;
  });
}

void l2_norm(float* x, int64_t rows, int64_t n, float eps) {
  l2_norm(static_cast<const float*>(x), rows, n, eps, x);
}

void rms_norm_ref(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const double inv = 1.0 / std::sqrt(sum_sq(x + r * n, n) / double(n) + eps);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = float(double(x[r * n + i]) * inv * w[i]);
  }
}

void gated_rms_norm_ref(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const double inv = 1.0 / std::sqrt(sum_sq(x + r * n, n) / double(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      const double gate = 1.0 / (1.0 + std::exp(-double(z[r * n + i])));
      y[r * n + i] = float(double(x[r * n + i]) * inv * w[i] * gate);
    }
  }
}

void l2_norm_ref(const float* x, int64_t rows, int64_t n, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const double inv = 1.0 / std::sqrt(sum_sq(x + r * n, n) + eps);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = float(double(x[r * n + i]) * inv);
  }
}

const OpTable<RmsNormFn, RmsNormBwdFn> kRmsNormOp =
    register_op<RmsNormFn, RmsNormBwdFn>({.name = "rms_norm",
                                          .ref = rms_norm_ref,
                                          .cpu = rms_norm,
                                          .cuda = K3_CUDA_IMPL(rms_norm_cuda),
                                          .bwd = rms_norm_bwd});
const OpTable<GatedRmsNormFn, GatedRmsNormBwdFn> kGatedRmsNormOp =
    register_op<GatedRmsNormFn, GatedRmsNormBwdFn>({.name = "gated_rms_norm",
                                                    .ref = gated_rms_norm_ref,
                                                    .cpu = gated_rms_norm,
                                                    .cuda = K3_CUDA_IMPL(gated_rms_norm_cuda),
                                                    .bwd = gated_rms_norm_bwd});
const OpTable<L2NormFn, L2NormBwdFn> kL2NormOp =
    register_op<L2NormFn, L2NormBwdFn>({.name = "l2_norm",
                                        .ref = l2_norm_ref,
                                        .cpu = l2_norm,
                                        .cuda = K3_CUDA_IMPL(l2_norm_cuda),
                                        .bwd = l2_norm_bwd});

}  // namespace k3
