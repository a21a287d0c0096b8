#include "ops/harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace k3::test {

std::vector<OpCase>& op_registry() {
  static std::vector<OpCase> cases;
  return cases;
}

std::vector<PerfCase>& perf_registry() {
  static std::vector<PerfCase> cases;
  return cases;
}

RegisterPerf::RegisterPerf(std::vector<PerfCase> cases) {
  for (PerfCase& c : cases) perf_registry().push_back(std::move(c));
}

Register::Register(std::vector<OpCase> cases) {
  for (OpCase& c : cases) op_registry().push_back(std::move(c));
}

double rel_max_error(const std::vector<float>& got, const std::vector<double>& want, double scale) {
  double err = 0, max_want = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::fabs(got[i] - want[i]));
    max_want = std::max(max_want, std::fabs(want[i]));
  }
  if (scale <= 0) scale = max_want;
  return scale > 0 ? err / scale : err;
}

namespace {

class OpTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OpTest, MatchesReference) {
  const OpCase& c = op_registry()[GetParam()];
  std::mt19937_64 rng(0x5eed0000 + GetParam());
  Outputs out = c.run(rng);
  ASSERT_EQ(out.got.size(), out.want.size()) << c.op << " " << c.shape;
  ASSERT_FALSE(out.want.empty()) << c.op << " " << c.shape;
  const double err = rel_max_error(out.got, out.want, out.scale);
  EXPECT_LE(err, c.tol) << c.op << " [" << c.shape << "]";
}

std::string case_name(const ::testing::TestParamInfo<size_t>& info) {
  const OpCase& c = op_registry()[info.param];
  std::string s = c.op + "_" + c.shape;
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s + "_" + std::to_string(info.param);
}

// Disabled by default (timings belong in benchmarks); bench/ops_perf.sh runs it.
TEST(OpPerf, DISABLED_AllCases) {
  std::printf("%-16s %-36s %10s %9s %8s\n", "op", "shape", "median ms", "GFLOP/s", "GB/s");
  for (size_t i = 0; i < perf_registry().size(); ++i) {
    const PerfCase& c = perf_registry()[i];
    std::mt19937_64 rng(0x9e3779b9 + i);
    std::function<void()> run = c.prepare(rng);
    run();  // warm-up: first touch of buffers
    std::vector<double> ms;
    for (int r = 0; r < 7; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("%-16s %-36s %10.3f %9.2f %8.2f\n", c.op.c_str(), c.shape.c_str(), med,
                c.flops / med * 1e-6, c.bytes / med * 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTest, ::testing::Range<size_t>(0, op_registry().size()), case_name);

}  // namespace
}  // namespace k3::test
