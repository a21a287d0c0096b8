#include "ops/harness.h"

#include <gtest/gtest.h>

namespace k3::test {

std::vector<OpCase>& op_registry() {
  static std::vector<OpCase> cases;
  return cases;
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

INSTANTIATE_TEST_SUITE_P(Ops, OpTest, ::testing::Range<size_t>(0, op_registry().size()), case_name);

}  // namespace
}  // namespace k3::test
