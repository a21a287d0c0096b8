// core/fast_math.h against libm in double over dense sweeps of their ranges.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "core/fast_math.h"

namespace k3 {
namespace {

double rel_err(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

// Every 1009th float of [lo, hi] by bit pattern (every binade of both signs), plus random ones.
template <typename F>
void sweep(float lo, float hi, F check) {
  for (float sign : {1.0f, -1.0f}) {
    const float end = sign > 0 ? hi : -lo;  // this sign's largest magnitude
    if (end <= 0) continue;
    for (uint32_t b = 0; std::bit_cast<float>(b) <= end; b += 1009) {
      const float x = sign * std::bit_cast<float>(b);
      if (x >= lo && x <= hi) check(x);
    }
  }
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int i = 0; i < 200000; ++i) check(u(rng));
}

TEST(FastMath, ExpWithinThreeUlp) {
  double worst = 0;
  sweep(-87.0f, 88.0f, [&](float x) {
    const double want = std::exp(double(x));
    const double e = rel_err(exp_fast(x), want);
    worst = std::max(worst, e);
    ASSERT_LE(e, 3 * 0x1p-24) << "x=" << x;
  });
  std::printf("exp_fast: worst relative error %.3g (%.2f ulp)\n", worst, worst / 0x1p-24);
  EXPECT_EQ(exp_fast(0.0f), 1.0f);
  EXPECT_GT(exp_fast(-1000.0f), 0.0f);  // clamped, not zero
  EXPECT_TRUE(std::isfinite(exp_fast(1000.0f)));
}

TEST(FastMath, TanhAndSigmoid) {
  double worst_t = 0, worst_s = 0;
  sweep(-30.0f, 30.0f, [&](float x) {
    if (x != 0.0f) {
      const double et = rel_err(tanh_fast(x), std::tanh(double(x)));
      worst_t = std::max(worst_t, et);
      ASSERT_LE(et, 4e-7) << "tanh x=" << x;
    }
    const double es = rel_err(sigmoid_fast(x), 1.0 / (1.0 + std::exp(-double(x))));
    worst_s = std::max(worst_s, es);
    ASSERT_LE(es, 4e-7) << "sigmoid x=" << x;
  });
  for (float x : {1e-30f, 1e-8f, 1e-3f, 0.2499f, 0.25f, 0.2501f}) {
    EXPECT_LE(rel_err(tanh_fast(x), std::tanh(double(x))), 4e-7) << x;
    EXPECT_EQ(tanh_fast(-x), -tanh_fast(x));
  }
  EXPECT_EQ(tanh_fast(0.0f), 0.0f);
  EXPECT_EQ(tanh_fast(100.0f), 1.0f);
  std::printf("tanh_fast %.3g, sigmoid_fast %.3g worst relative error\n", worst_t, worst_s);
}

}  // namespace
}  // namespace k3
