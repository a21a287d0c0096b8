#include "train/matmul.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/parallel.h"

namespace k3::train {
namespace {

size_t at(int64_t i) { return static_cast<size_t>(i); }
bool worth_threads(int64_t m, int64_t k, int64_t n) { return m * k * n >= (int64_t{1} << 20); }

constexpr int64_t kRows = 4;     // rows of c updated together: each b element loaded once per 4
constexpr int64_t kCols = 256;   // columns of a tile: 4 x 256 accumulators stay in L1
constexpr int64_t kDepth = 256;  // depth of a tile: a 256 x 256 block of b stays in L2

// c[r0 .. r0+rows, j0 .. j0+cols] += a[., p0 .. p1] · b[p0 .. p1, j0 .. j0+cols]
void tile(const float* a, const float* b, float* c, int64_t k, int64_t n, int64_t r0, int64_t rows,
          int64_t j0, int64_t cols, int64_t p0, int64_t p1) {
  float acc[kRows][kCols];
  for (int64_t r = 0; r < rows; ++r) std::copy_n(c + at((r0 + r) * n + j0), cols, acc[r]);
  for (int64_t p = p0; p < p1; ++p) {
    const float* bp = b + at(p * n + j0);
    if (rows == kRows) {
      const float a0 = a[at(r0 * k + p)], a1 = a[at((r0 + 1) * k + p)];
      const float a2 = a[at((r0 + 2) * k + p)], a3 = a[at((r0 + 3) * k + p)];
      for (int64_t j = 0; j < cols; ++j) {
        const float x = bp[j];
        acc[0][j] += a0 * x;
        acc[1][j] += a1 * x;
        acc[2][j] += a2 * x;
        acc[3][j] += a3 * x;
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        const float ar = a[at((r0 + r) * k + p)];
        for (int64_t j = 0; j < cols; ++j) acc[r][j] += ar * bp[j];
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) std::copy_n(acc[r], cols, c + at((r0 + r) * n + j0));
}

}  // namespace

void matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  std::fill(c, c + at(m * n), 0.0f);
  const int64_t row_groups = (m + kRows - 1) / kRows;
  for (int64_t j0 = 0; j0 < n; j0 += kCols) {
    const int64_t cols = std::min(kCols, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
      const int64_t p1 = std::min(k, p0 + kDepth);
      parallel_for(row_groups, worth_threads(m, k, n), [&](int64_t g) {
        const int64_t r0 = g * kRows;
        tile(a, b, c, k, n, r0, std::min(kRows, m - r0), j0, cols, p0, p1);
      });
    }
  }
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
