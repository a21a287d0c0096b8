// The blocked fp32 products of the optimiser against plain double loops, on fresh random
// inputs over shapes that cross every tile edge (4 rows, 256 columns, 256 depth) and
// degenerate ones.
#include "train/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

namespace k3::train {
namespace {

std::vector<float> random_vec(size_t n, std::mt19937_64& gen) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen);
  return v;
}

TEST(TrainMatmul, MatchesPlainLoops) {
  std::mt19937_64 gen(11);
  const int64_t shapes[][3] = {{1, 1, 1},   {1, 7, 1},     {3, 1, 5},     {4, 256, 256},
                               {5, 257, 3}, {9, 300, 513}, {17, 33, 260}, {64, 64, 64},
                               {2, 600, 9}, {130, 5, 270}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], k = s[1], n = s[2];
    std::vector<float> a = random_vec(size_t(m * k), gen), b = random_vec(size_t(k * n), gen);
    std::vector<float> c(size_t(m * n), 123.0f);  // stale contents must be overwritten
    matmul(a.data(), b.data(), c.data(), m, k, n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) want += double(a[i * k + p]) * b[p * n + j];
        ASSERT_NEAR(c[i * n + j], want, 1e-5 * std::sqrt(double(k)) + 1e-6)
            << m << "x" << k << "x" << n << " at " << i << "," << j;
      }
    }
    std::vector<float> g(size_t(m * m), -5.0f), t(size_t(k * m));
    gram(a.data(), g.data(), m, k);
    transpose(a.data(), t.data(), m, k);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < k; ++p) ASSERT_EQ(t[p * m + i], a[i * k + p]);
      for (int64_t j = 0; j < m; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) want += double(a[i * k + p]) * a[j * k + p];
        ASSERT_NEAR(g[i * m + j], want, 1e-5 * std::sqrt(double(k)) + 1e-6) << m << "x" << k;
      }
    }
  }
}

// The symmetric products compute the lower triangle and mirror it: the same bits as the full
// product (each element is one fp32 chain over k; the mirrored one has the same products).
TEST(TrainMatmul, SymmetricProductsEqualTheFullOnes) {
  std::mt19937_64 gen(13);
  for (auto [m, k] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {63, 64}, {65, 130}, {130, 300}}) {
    const std::vector<float> x = random_vec(size_t(m * k), gen);
    std::vector<float> xt(size_t(k * m)), full(size_t(m * m)), g(size_t(m * m), 9.0f);
    transpose(x.data(), xt.data(), m, k);
    matmul(x.data(), xt.data(), full.data(), m, k, m);
    gram(x.data(), g.data(), m, k);
    ASSERT_EQ(g, full) << "gram " << m << "x" << k;
    std::vector<float> sq(size_t(m * m), -1.0f), want(size_t(m * m));
    square_symmetric(g.data(), sq.data(), m);
    matmul(g.data(), g.data(), want.data(), m, m, m);
    ASSERT_EQ(sq, want) << "square " << m;
  }
}

}  // namespace
}  // namespace k3::train
