#include "train/newton_schulz.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "k3/error.h"
#include "train/matmul.h"

namespace k3::train {
namespace {

size_t at(int64_t i) { return static_cast<size_t>(i); }

// In place on x[m, n] with m <= n.
void iterate_wide(float* x, int64_t m, int64_t n, int steps, NsCoefficients coef) {
  std::vector<float> a(at(m * m)), poly(at(m * m)), next(at(m * n));
  for (int s = 0; s < steps; ++s) {
    gram(x, a.data(), m, n);                     // A = X Xᵀ        [m, m]
    square_symmetric(a.data(), poly.data(), m);  // A²             [m, m]
    for (size_t i = 0; i < poly.size(); ++i) poly[i] = coef.b * a[i] + coef.c * poly[i];
    matmul(poly.data(), x, next.data(), m, m, n);  // (bA + cA²) X    [m, n]
    for (size_t i = 0; i < next.size(); ++i) x[i] = coef.a * x[i] + next[i];
  }
}

}  // namespace

void newton_schulz(const float* g, float* out, int64_t rows, int64_t cols, int steps,
                   NsCoefficients coef) {
  check(rows >= 1 && cols >= 1, "newton_schulz: empty matrix ", rows, " x ", cols);
  check(steps >= 0, "newton_schulz: negative step count ", steps);
  const size_t count = at(rows * cols);
  double norm2 = 0;
  for (size_t i = 0; i < count; ++i) norm2 += double(g[i]) * double(g[i]);
  // The epsilon keeps a zero gradient at zero instead of NaN.
  const float inv = static_cast<float>(1.0 / (std::sqrt(norm2) + 1e-7));
  if (rows <= cols) {
    for (size_t i = 0; i < count; ++i) out[i] = g[i] * inv;
    iterate_wide(out, rows, cols, steps, coef);
    return;
  }
  std::vector<float> x(count);
  transpose(g, x.data(), rows, cols);  // [cols, rows]
  for (float& v : x) v *= inv;
  iterate_wide(x.data(), cols, rows, steps, coef);
  transpose(x.data(), out, cols, rows);
}

double newton_schulz_scalar(double x, int steps, NsCoefficients coef) {
  for (int s = 0; s < steps; ++s) {
    const double x2 = x * x;
    x = x * (coef.a + x2 * (coef.b + coef.c * x2));
  }
  return x;
}

}  // namespace k3::train
