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

void gram(const float* x, float* c, int64_t m, int64_t k) {
  // X Xᵀ as a product with an explicit transpose: the blocked kernel beats row dot products.
  std::vector<float> xt(at(k * m));
  transpose(x, xt.data(), m, k);
  matmul(x, xt.data(), c, m, k, m);
}

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
