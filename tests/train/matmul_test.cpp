// The blocked fp32 products of the optimiser against plain double loops, on fresh random
// inputs over shapes that cross every tile edge (4 rows, 256 columns, 256 depth) and
// degenerate ones.
#include "train/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
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

}  // namespace
}  // namespace k3::train
