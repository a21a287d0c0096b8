// SiTU-GLU vs SwiGLU vs GLU: the exact values of spec §11.1 and [A2] FIG 10 (a = b = 40).
#include "cost/situ.h"

#include <gtest/gtest.h>

#include <cmath>

#include "util.h"

namespace k3::cost {
namespace {

TEST(CostSitu, SpecTable) {
  SituBetas beta{4.0, 25.0};
  EXPECT_NEAR(situ_glu(40, 40, beta), 92.16686, 5e-6);
  EXPECT_NEAR(swiglu(40, 40), 1600, 1e-9);
  EXPECT_NEAR(situ_glu(2, 3, beta), 4.86107, 5e-6);
  EXPECT_NEAR(swiglu(2, 3), 5.28478, 5e-6);
  EXPECT_NEAR(glu(2, 3), 2.64239, 5e-6);
  EXPECT_NEAR(situ_glu(1, 1, beta), 0.715818, 5e-7);
  EXPECT_NEAR(situ_glu(-1, 1, beta), -0.263335, 5e-7);
  EXPECT_NEAR(situ_glu(10, 10, beta), 37.48461, 5e-6);
  EXPECT_EQ(situ_glu(0, 7.5, beta), 0.0);
  // The article's rounding: 92.17 vs 1600.
  EXPECT_EQ(std::round(situ_glu(40, 40, beta) * 100) / 100, 92.17);
}

TEST(CostSitu, TableUsesTheConfigBetas) {
  std::vector<SituRow> rows =
      situ_table({test::kimi_k3().situ_beta, test::kimi_k3().situ_linear_beta});
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].a, 40);
  EXPECT_NEAR(rows[0].situ, 92.16686, 5e-6);
  EXPECT_EQ(rows[0].swiglu, 1600);
  EXPECT_NEAR(rows[1].glu, 2.64239, 5e-6);
}

TEST(CostSitu, GateBranchRange) {
  GateMinimum g = situ_gate_minimum(4.0);
  EXPECT_NEAR(g.value, -0.26977, 5e-6);
  EXPECT_NEAR(g.a, -1.219, 1e-3);
  EXPECT_LT(situ_gate(10, 4.0), 4.0);
  EXPECT_NEAR(situ_gate(60, 4.0), 4.0, 1e-9);  // tends to beta_1
  EXPECT_NEAR(situ_up(1e6, 25.0), 25.0, 1e-12);
  EXPECT_NEAR(situ_up(-1e6, 25.0), -25.0, 1e-12);
}

TEST(CostSitu, Curves) {
  SituCurves c = situ_curves({4, 25}, -8, 8, 161, 40);
  ASSERT_EQ(c.a.size(), 161u);
  EXPECT_DOUBLE_EQ(c.a.front(), -8);
  EXPECT_DOUBLE_EQ(c.a.back(), 8);
  EXPECT_DOUBLE_EQ(c.diag.back(), 40);
  EXPECT_NEAR(c.diag_situ.back(), 92.16686, 5e-6);
  for (double v : c.diag) EXPECT_GT(v, 0);
}

}  // namespace
}  // namespace k3::cost
