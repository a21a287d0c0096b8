#include "train/matmul.h"

#include <algorithm>
#include <cstddef>

namespace k3::train {
namespace {

size_t at(int64_t i) { return static_cast<size_t>(i); }
bool worth_threads(int64_t m, int64_t k, int64_t n) { return m * k * n >= (int64_t{1} << 18); }

}  // namespace

void matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  // i-k-j order: the inner loop runs along contiguous rows of b and c and vectorises.
#pragma omp parallel for schedule(static) if (worth_threads(m, k, n))
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + at(i * n);
    std::fill(ci, ci + n, 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float aip = a[at(i * k + p)];
      const float* bp = b + at(p * n);
      for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}

void gram(const float* x, float* c, int64_t m, int64_t k) {
  // Upper triangle by row dot products, then mirrored.
#pragma omp parallel for schedule(dynamic, 8) if (worth_threads(m, k, m))
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + at(i * k);
    for (int64_t j = i; j < m; ++j) {
      const float* xj = x + at(j * k);
      float s = 0;
      for (int64_t p = 0; p < k; ++p) s += xi[p] * xj[p];
      c[at(i * m + j)] = s;
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < i; ++j) c[at(i * m + j)] = c[at(j * m + i)];
  }
}

void transpose(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < cols; ++col) out[at(col * rows + r)] = in[at(r * cols + col)];
  }
}

}  // namespace k3::train
