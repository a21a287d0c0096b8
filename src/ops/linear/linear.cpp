#include "ops/linear/linear.h"

#include <algorithm>
#include <vector>

#include "core/bf16.h"
#include "ops/mxfp4/mxfp4.h"

namespace k3 {

void mat_row(const Mat& w, int64_t r, float* out) {
  switch (w.format) {
    case MatFormat::f32: {
      const float* p = static_cast<const float*>(w.data) + r * w.cols;
      for (int64_t i = 0; i < w.cols; ++i) out[i] = p[i];
      break;
    }
    case MatFormat::bf16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + r * w.cols;
      for (int64_t i = 0; i < w.cols; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
    case MatFormat::mxfp4: {
      const uint8_t* p = static_cast<const uint8_t*>(w.data) + r * (w.cols / 2);
      mxfp4_decode_row(p, w.scales + r * (w.cols / kMxfp4Group), w.cols, out);
      break;
    }
  }
}

void linear_ref(const float* x, int64_t T, const Mat& w, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    mat_row(w, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      double acc = 0;
      for (int64_t i = 0; i < w.cols; ++i) acc += static_cast<double>(x[t * w.cols + i]) * row[i];
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

namespace {

// 8 independent partial sums so the compiler can vectorise without -ffast-math.
inline float dot(const float* a, const float* b, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  }
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

}  // namespace

void linear(const float* x, int64_t T, const Mat& w, float* y) {
  constexpr int64_t kRowsPerBlock = 8;
  const int64_t n_blocks = (w.rows + kRowsPerBlock - 1) / kRowsPerBlock;
#pragma omp parallel
  {
    std::vector<float> rows(static_cast<size_t>(kRowsPerBlock * w.cols));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t r0 = b * kRowsPerBlock;
      const int64_t nr = std::min(kRowsPerBlock, w.rows - r0);
      for (int64_t j = 0; j < nr; ++j) mat_row(w, r0 + j, rows.data() + j * w.cols);
      for (int64_t t = 0; t < T; ++t) {
        const float* xt = x + t * w.cols;
        for (int64_t j = 0; j < nr; ++j) y[t * w.rows + r0 + j] = dot(xt, rows.data() + j * w.cols, w.cols);
      }
    }
  }
}

}  // namespace k3
