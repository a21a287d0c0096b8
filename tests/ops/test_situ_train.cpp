// The training path's SiTU-GLU forward (fast float maths) against the double reference.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/harness.h"
#include "ops/situ/situ_train.h"

namespace k3::test {
namespace {

TEST(SituTrain, MatchesReference) {
  std::mt19937_64 rng(17);
  for (int64_t n : {1, 3, 4, 7, 64, 1001}) {
    for (double spread : {0.5, 4.0, 40.0}) {  // small, typical and saturating arguments
      const std::vector<float> a = randn(rng, n, spread), b = randn(rng, n, spread);
      std::vector<float> got(n), want(n);
      const SituParams p{4.0f, 25.0f};
      situ_glu_train(a.data(), b.data(), n, p, got.data());
      situ_glu_ref_array(a.data(), b.data(), n, p, want.data());
      for (int64_t i = 0; i < n; ++i) {
        // Three factors at 4e-7 each, a product rounding or two: 2e-6 relative.
        ASSERT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i]) + 1e-30)
            << "n=" << n << " a=" << a[i] << " b=" << b[i];
      }
    }
  }
  std::vector<float> x = {1.5f, -2.0f}, y = {3.0f, 0.5f}, alias = x;
  situ_glu_train(alias.data(), y.data(), 2, {}, alias.data());  // out aliasing gate
  std::vector<float> sep(2);
  situ_glu_train(x.data(), y.data(), 2, {}, sep.data());
  EXPECT_EQ(alias, sep);
}

}  // namespace
}  // namespace k3::test
