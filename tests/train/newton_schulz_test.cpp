// Newton–Schulz: the output keeps the singular vectors and maps every normalised singular value
// through the scalar polynomial, which for Muon's coefficients lands in [0.68, 1.21].
#include "train/newton_schulz.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "train/linalg.h"

namespace k3::train {
namespace {

using testing::singular_values;

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> m(static_cast<size_t>(rows * cols));
  for (float& x : m) x = normal(gen);
  return m;
}

double frobenius(const std::vector<float>& m) {
  double s = 0;
  for (float x : m) s += double(x) * x;
  return std::sqrt(s);
}

struct Shape {
  int64_t rows, cols;
};
const Shape kShapes[] = {{1, 1},   {1, 7},   {7, 1},   {2, 2},   {3, 5},
                         {16, 16}, {24, 40}, {40, 24}, {33, 97}, {64, 48}};

TEST(NewtonSchulz, SingularValuesFollowTheScalarMap) {
  uint64_t seed = 1;
  for (Shape s : kShapes) {
    std::vector<float> g = random_matrix(s.rows, s.cols, seed++), out(g.size());
    newton_schulz(g.data(), out.data(), s.rows, s.cols);
    const double norm = frobenius(g);
    std::vector<double> sg = singular_values(g.data(), s.rows, s.cols);
    std::vector<double> so = singular_values(out.data(), s.rows, s.cols);
    // The map is not monotone on [0, 1], so compare the sorted outputs with the sorted image.
    std::vector<double> image;
    for (double v : sg) image.push_back(newton_schulz_scalar(v / norm));
    std::sort(image.begin(), image.end());
    for (size_t i = 0; i < sg.size(); ++i) {
      EXPECT_NEAR(so[i], image[i], 2e-3 * std::max(1.0, image[i]))
          << s.rows << "x" << s.cols << " sv " << i;
    }
    // The promise: singular values above 0.002 |G|_F end in [0.68, 1.21].
    if (sg.front() / norm > 0.002) {
      EXPECT_GE(so.front(), 0.675) << s.rows << "x" << s.cols;
      EXPECT_LE(so.back(), 1.215) << s.rows << "x" << s.cols;
    }
  }
}

TEST(NewtonSchulz, ScalarMapRange) {
  for (int i = 0; i <= 10000; ++i) {
    const double x = 0.002 * std::pow(500.0, i / 10000.0), y = newton_schulz_scalar(x);
    EXPECT_GE(y, 0.68) << x;
    EXPECT_LE(y, 1.21) << x;
  }
}

TEST(NewtonSchulz, KeepsTheSingularVectors) {
  // O = U f(S) Vᵀ and G = U S Vᵀ give O Gᵀ = U f(S) S Uᵀ: symmetric positive semi-definite.
  uint64_t seed = 100;
  for (Shape s : kShapes) {
    std::vector<float> g = random_matrix(s.rows, s.cols, seed++), out(g.size());
    newton_schulz(g.data(), out.data(), s.rows, s.cols);
    std::vector<double> p(static_cast<size_t>(s.rows * s.rows), 0.0);
    double scale = 0;
    for (int64_t i = 0; i < s.rows; ++i) {
      for (int64_t j = 0; j < s.rows; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < s.cols; ++k) acc += double(out[i * s.cols + k]) * g[j * s.cols + k];
        p[static_cast<size_t>(i * s.rows + j)] = acc;
        scale = std::max(scale, std::abs(acc));
      }
    }
    for (int64_t i = 0; i < s.rows; ++i) {
      for (int64_t j = 0; j < i; ++j) {
        EXPECT_NEAR(p[i * s.rows + j], p[j * s.rows + i], 1e-4 * scale) << s.rows << "x" << s.cols;
      }
    }
    for (double ev : testing::sym_eigenvalues(p, s.rows)) EXPECT_GE(ev, -1e-4 * scale);
  }
}

TEST(NewtonSchulz, CubicConvergesToOrthogonal) {
  // A well-conditioned 12 x 20 matrix (singular values within a factor ~3.7): the classic
  // iteration drives them all to 1, so O Oᵀ = I.
  std::vector<float> g = random_matrix(12, 20, 7), out(g.size());
  newton_schulz(g.data(), out.data(), 12, 20, 40, kNsCubic);
  for (double sv : singular_values(out.data(), 12, 20)) EXPECT_NEAR(sv, 1.0, 1e-5);
}

TEST(NewtonSchulz, RankOneAndZero) {
  // A rank-one matrix has one singular value, |G|_F itself: O = p⁵(1) G / |G|_F.
  std::vector<float> g = {1, -2, 2, 2, -4, 4}, out(6);  // (1, 2)ᵀ (1, -2, 2), |G|_F = 3 sqrt 5
  newton_schulz(g.data(), out.data(), 2, 3);
  const double f1 = newton_schulz_scalar(1.0), norm = 3 * std::sqrt(5.0);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(out[i], f1 * g[i] / norm, 1e-6);
  std::vector<float> zero(6, 0.0f);
  newton_schulz(zero.data(), out.data(), 3, 2);
  for (float x : out) EXPECT_EQ(x, 0.0f);
}

TEST(NewtonSchulz, TallIsTheTransposeOfWide) {
  std::vector<float> g = random_matrix(9, 4, 3), gt(g.size()), out(g.size()), outt(g.size());
  for (int64_t r = 0; r < 9; ++r)
    for (int64_t c = 0; c < 4; ++c) gt[c * 9 + r] = g[r * 4 + c];
  newton_schulz(g.data(), out.data(), 9, 4);
  newton_schulz(gt.data(), outt.data(), 4, 9);
  for (int64_t r = 0; r < 9; ++r)
    for (int64_t c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(out[r * 4 + c], outt[c * 9 + r]);
}

}  // namespace
}  // namespace k3::train
