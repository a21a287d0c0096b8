// Timings of the optimiser's Newton–Schulz (disabled: timings are not assertions). Run with
//   build/test_train --gtest_also_run_disabled_tests --gtest_filter='*TrainToolsPerf*'
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "train/newton_schulz.h"

namespace k3::train {
namespace {

TEST(TrainToolsPerf, DISABLED_NewtonSchulz) {
  const int64_t shapes[][2] = {{128, 128}, {256, 768}, {768, 256}, {512, 2048}, {1024, 4096}};
  for (const auto& s : shapes) {
    std::vector<float> g(size_t(s[0] * s[1])), out(g.size());
    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    for (float& x : g) x = normal(gen);
    const auto t0 = std::chrono::steady_clock::now();
    newton_schulz(g.data(), out.data(), s[0], s[1]);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Per step: X Xᵀ (2 m² k), A² (2 m³), (bA + cA²) X (2 m² k); m <= k.
    const double m = double(std::min(s[0], s[1])), k = double(std::max(s[0], s[1]));
    const double flops = 5 * (4 * m * m * k + 2 * m * m * m);
    std::printf("newton_schulz %lld x %lld: %.4f s, %.1f GFLOP/s\n", static_cast<long long>(s[0]),
                static_cast<long long>(s[1]), sec, flops / sec / 1e9);
    EXPECT_EQ(out.size(), g.size());
  }
}

}  // namespace
}  // namespace k3::train
