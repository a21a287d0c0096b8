// Newton–Schulz orthogonalisation for Muon (spec §8): maps a matrix G = U S Vᵀ to roughly U Vᵀ
// without an SVD. G is first scaled to unit Frobenius norm (so every singular value is <= 1),
// then each step applies X <- a X + (b A + c A²) X with A = X Xᵀ, i.e. the odd polynomial
// p(x) = a x + b x³ + c x⁵ to every singular value at once while keeping U and V. The output is
// therefore exactly U p^steps(S / |G|_F) Vᵀ: that is what the tests check.
//
//   quintic (3.4445, -4.7750, 2.0315), 5 steps — Muon's coefficients: fast, and after 5 steps
//     every singular value that started above 0.002 |G|_F lands in [0.68, 1.21], and above
//     0.01 |G|_F in [0.68, 1.14] (not exactly 1: Muon trades exactness for speed).
//   cubic (1.5, -0.5, 0) — the classic iteration: converges to exactly 1, slowly for small
//     singular values.
// The iteration runs on the wide orientation (rows <= cols), so A is the smaller Gram matrix.
#pragma once

#include <cstdint>

namespace k3::train {

struct NsCoefficients {
  float a, b, c;
};
constexpr NsCoefficients kNsQuintic{3.4445f, -4.7750f, 2.0315f};
constexpr NsCoefficients kNsCubic{1.5f, -0.5f, 0.0f};

// out[rows, cols] = NS(g[rows, cols]); out may not alias g. A zero matrix gives zeros.
void newton_schulz(const float* g, float* out, int64_t rows, int64_t cols, int steps = 5,
                   NsCoefficients coef = kNsQuintic);

// The scalar map the iteration applies to each normalised singular value x in [0, 1].
double newton_schulz_scalar(double x, int steps = 5, NsCoefficients coef = kNsQuintic);

}  // namespace k3::train
