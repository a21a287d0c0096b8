// Test-side linear algebra in double: eigenvalues of a symmetric matrix by cyclic Jacobi, and
// singular values through them. Independent of the code under test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace k3::train::testing {

// Eigenvalues of the symmetric n x n matrix a (row-major), ascending.
inline std::vector<double> sym_eigenvalues(std::vector<double> a, int64_t n) {
  auto A = [&](int64_t i, int64_t j) -> double& { return a[static_cast<size_t>(i * n + j)]; };
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) off += A(i, j) * A(i, j);
    if (off < 1e-30) break;
    for (int64_t p = 0; p < n; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        if (std::abs(A(p, q)) < 1e-300) continue;
        const double theta = (A(q, q) - A(p, p)) / (2 * A(p, q));
        const double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int64_t k = 0; k < n; ++k) {  // columns p, q
          const double akp = A(k, p), akq = A(k, q);
          A(k, p) = c * akp - s * akq;
          A(k, q) = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows p, q
          const double apk = A(p, k), aqk = A(q, k);
          A(p, k) = c * apk - s * aqk;
          A(q, k) = s * apk + c * aqk;
        }
      }
    }
  }
  std::vector<double> ev(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ev[static_cast<size_t>(i)] = A(i, i);
  std::sort(ev.begin(), ev.end());
  return ev;
}

// The min(rows, cols) singular values of m[rows, cols], ascending.
template <typename T>
std::vector<double> singular_values(const T* m, int64_t rows, int64_t cols) {
  const int64_t n = std::min(rows, cols);
  std::vector<double> g(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      if (rows <= cols) {
        for (int64_t k = 0; k < cols; ++k) s += double(m[i * cols + k]) * double(m[j * cols + k]);
      } else {
        for (int64_t k = 0; k < rows; ++k) s += double(m[k * cols + i]) * double(m[k * cols + j]);
      }
      g[static_cast<size_t>(i * n + j)] = s;
    }
  }
  std::vector<double> ev = sym_eigenvalues(g, n);
  for (double& e : ev) e = std::sqrt(std::max(e, 0.0));
  return ev;
}

}  // namespace k3::train::testing
