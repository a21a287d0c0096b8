#include "train/matmul.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/gemm.h"

namespace k3::train {
namespace {

size_t at(int64_t i) { return static_cast<size_t>(i); }

}  // namespace

void matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  std::fill(c, c + at(m * n), 0.0f);
  gemm_acc(m, n, k, {a, k, 1}, b, n, c, n);  // c [m, n] += a [m, k] · b [k, n]
}

namespace {

// c[m, m] = a[m, k] · b[k, m] for a product known to be symmetric: the row blocks' parts on
// and below the diagonal, then the upper triangle copied from the lower. The copy changes no
// bit: c[j, i] sums the same products as c[i, j] in the same order (each element is one chain
// over k, core/gemm.h), and multiplication commutes exactly.
void symmetric_product(const float* a, const float* b, float* c, int64_t m, int64_t k) {
  constexpr int64_t kBlock = 64;
  std::fill(c, c + at(m * m), 0.0f);
  for (int64_t i0 = 0; i0 < m; i0 += kBlock) {
    const int64_t rows = std::min(kBlock, m - i0);
    gemm_acc(rows, i0 + rows, k, {a + i0 * k, k, 1}, b, m, c + i0 * m, m);
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = i + 1; j < m; ++j) c[at(i * m + j)] = c[at(j * m + i)];
  }
}

}  // namespace

void gram(const float* x, float* c, int64_t m, int64_t k) {
  // X Xᵀ as a product with an explicit transpose: the blocked kernel beats row dot products.
  std::vector<float> xt(at(k * m));
  transpose(x, xt.data(), m, k);
  symmetric_product(x, xt.data(), c, m, k);
}

void square_symmetric(const float* a, float* c, int64_t m) { symmetric_product(a, a, c, m, m); }

void transpose(const float* in, float* out, int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t r1 = std::min(rows, r0 + kBlock), c1 = std::min(cols, c0 + kBlock);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t col = c0; col < c1; ++col) out[at(col * rows + r)] = in[at(r * cols + col)];
      }
    }
  }
}

}  // namespace k3::train
