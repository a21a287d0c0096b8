// QB vs Loss-Free: the update rules on hand-checked batches, the seeded simulation ([A2] FIG 17:
// 41 observations, seed 20260909) and the 3x3 fixed-point example (dual 5 vs optimum 4).
#include "cost/qb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "cost/qb_sim.h"
#include "cost/qb_toy.h"

namespace k3::cost {
namespace {

TEST(CostQb, MaxViolation) {
  // 4 tokens, k = 2, 4 experts: mean load 2; max 4 -> MaxVio 1.
  EXPECT_DOUBLE_EQ(max_violation({4, 2, 1, 1}, 4, 2), 1.0);
  EXPECT_DOUBLE_EQ(max_violation({2, 2, 2, 2}, 4, 2), 0.0);
}

TEST(CostQb, RouteAndThresholds) {
  Scores sc{2,
            4,
            {0.9, 0.1, 0.5, 0.3,  //
             0.2, 0.8, 0.4, 0.6}};
  std::vector<double> b = {0, 0, 0, 0};
  Routing p = route(sc, 2, b, QbConvention::paddle);
  EXPECT_EQ(p.loads, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(p.alpha[0], 0.3);  // (k+1)-th largest
  EXPECT_DOUBLE_EQ(p.alpha[1], 0.4);
  Routing k = route(sc, 2, b, QbConvention::kth);
  EXPECT_DOUBLE_EQ(k.alpha[0], 0.5);  // k-th largest
  EXPECT_DOUBLE_EQ(k.alpha[1], 0.6);
  // A bias moves expert 1 into token 0's top-2.
  Routing biased = route(sc, 2, {0, 0.5, 0, 0}, QbConvention::paddle);
  EXPECT_EQ(biased.loads, (std::vector<int64_t>{1, 2, 0, 1}));
}

TEST(CostQb, TiesGoToTheLowerExpert) {
  Scores sc{1, 3, {0.5, 0.5, 0.5}};
  EXPECT_EQ(route(sc, 1, {0, 0, 0}, QbConvention::paddle).loads, (std::vector<int64_t>{1, 0, 0}));
}

TEST(CostQb, ExactQuantileIsTheQPlusFirstSmallest) {
  // Expert 0 is more popular for every token. k = 1, N = 2, T = 4: q = 2. Under `paddle`,
  // alpha_t is token t's score for expert 1, so r_{.,0} = (-0.8, -0.5, -0.3, -0.1) and
  // r_{.,1} = 0; the (q+1)-th smallest gives b = (-0.3, 0), centred to (-0.15, 0.15).
  Scores sc{4, 2, {0.9, 0.1, 0.8, 0.3, 0.7, 0.4, 0.6, 0.5}};
  std::vector<double> b = qb_step(sc, 1, {0, 0}, 0, QbConvention::paddle);
  EXPECT_NEAR(b[0], -0.15, 1e-15);
  EXPECT_NEAR(b[1], 0.15, 1e-15);
  // Exactly q = 2 tokens have r_{t,0} < b_0 - b_1 and would pick expert 0; token 2 sits on the
  // boundary (a tie, resolved to the lower index), so this hand-made batch routes 3 : 1.
  EXPECT_EQ(route(sc, 1, b, QbConvention::paddle).loads, (std::vector<int64_t>{3, 1}));
  // `kth`: alpha_t is the top score and b_e the q-th smallest r.
  std::vector<double> bk = qb_step(sc, 1, {0, 0}, 0, QbConvention::kth);
  EXPECT_NEAR(bk[0] - bk[1], 0 - 0.3, 1e-15);  // r_{.,0} = 0, r_{.,1} = (0.8, 0.5, 0.3, 0.1)
}

TEST(CostQb, HistogramApproachesExact) {
  QbSimOptions o;
  o.experts = 32;
  o.top_k = 4;
  o.tokens = 512;
  Scores sc = qb_sim_batch(o, qb_sim_popularity(o), 0);
  std::vector<double> b0(32, 0.0);
  std::vector<double> alpha = route(sc, 4, b0, QbConvention::paddle).alpha;
  std::vector<double> exact = qb_bias_exact(sc, 4, alpha, QbConvention::paddle);
  for (int64_t bins : {100, 1000, 100000}) {
    std::vector<double> hist = qb_bias_histogram(sc, 4, alpha, -1, 1, bins, QbConvention::paddle);
    for (size_t e = 0; e < exact.size(); ++e) {
      // Within one bin width (the exact value sits inside the quantile bin), and the mean shift.
      EXPECT_NEAR(hist[e], exact[e], 2 * 2.0 / static_cast<double>(bins)) << bins;
    }
  }
  EXPECT_EQ(qb_range_lo({0.5, -0.25}), -1.25);
  EXPECT_EQ(qb_range_hi({0.5, -0.25}), 1.5);
}

TEST(CostQb, LossFreeStepsBySign) {
  std::vector<double> b = loss_free_update({4, 2, 0, 2}, 4, 2, {0, 0, 0, 0}, 1e-3);
  EXPECT_EQ(b, (std::vector<double>{-1e-3, 0, 1e-3, 0}));
}

TEST(CostQb, DualBoundsTheAssignment) {
  Scores sc = qb_toy_scores();
  EXPECT_DOUBLE_EQ(dual_objective(sc, 1, {0, 0, 0}), 1 + 2 + 3);
  EXPECT_GE(dual_objective(sc, 1, {0.3, -0.1, -0.2}), best_assignment(sc, nullptr));
}

TEST(CostQb, ToyFixedPointGap) {
  QbToyResult t = qb_toy();
  EXPECT_DOUBLE_EQ(t.optimum, 4);
  EXPECT_EQ(t.best, (std::vector<int64_t>{2, 0, 1}));
  // k-th threshold / q-th smallest: one move, then stuck with dual 5 > 4.
  ASSERT_TRUE(t.kth.fixed_point);
  ASSERT_EQ(t.kth.dual.size(), 2u);
  EXPECT_DOUBLE_EQ(t.kth.dual[0], 6);
  EXPECT_NEAR(t.kth.dual[1], 5, 1e-12);
  EXPECT_NEAR(t.kth.bias[1][0], 2.0 / 3, 1e-12);
  EXPECT_NEAR(t.kth.bias[1][1], -1.0 / 3, 1e-12);
  EXPECT_NEAR(t.kth.bias[1][2], -1.0 / 3, 1e-12);
  // (k+1)-th threshold / (q+1)-th smallest reaches the optimum on this matrix.
  ASSERT_TRUE(t.paddle.fixed_point);
  EXPECT_NEAR(t.paddle.dual.back(), 4, 1e-12);
}

QbSimOptions small_sim() {
  QbSimOptions o;
  o.experts = 64;
  o.top_k = 4;
  o.tokens = 1024;
  return o;
}

TEST(CostQb, SimulationIsSeededAndRecordsEveryStep) {
  QbSimOptions o = small_sim();
  QbSimResult a = qb_simulate(o), b = qb_simulate(o);
  EXPECT_EQ(a.options.seed, 20260909u);
  ASSERT_EQ(a.exact.size(), 41u);
  ASSERT_EQ(a.histogram.size(), 41u);
  ASSERT_EQ(a.loss_free.size(), 41u);
  EXPECT_EQ(a.exact, b.exact);
  EXPECT_EQ(a.histogram, b.histogram);
  EXPECT_EQ(a.loss_free, b.loss_free);
  // Observation 0 routes with b = 0 for all three.
  EXPECT_EQ(a.exact[0], a.histogram[0]);
  EXPECT_EQ(a.exact[0], a.loss_free[0]);
  o.seed = 1;
  EXPECT_NE(qb_simulate(o).exact, a.exact);
}

TEST(CostQb, SimulationBalances) {
  QbSimResult r = qb_simulate(small_sim());
  double tail_exact = 0, tail_hist = 0;
  for (size_t i = 31; i < 41; ++i) {
    tail_exact += r.exact[i] / 10;
    tail_hist += r.histogram[i] / 10;
  }
  EXPECT_GT(r.exact[0], 1.0);             // the skewed router starts far from balance
  EXPECT_LT(tail_exact, r.exact[0] / 3);  // QB removes most of it
  EXPECT_LT(tail_hist, r.exact[0] / 3);
  EXPECT_LT(r.max_gap, 0.25);  // 1000 bins track the exact quantile closely
  double gap = 0;
  for (size_t i = 0; i < 41; ++i) gap = std::max(gap, std::abs(r.exact[i] - r.histogram[i]));
  EXPECT_EQ(gap, r.max_gap);
  // MaxVio is a multiple of 1 / (T k / N) minus one: loads are whole tokens.
  double mean = 1024.0 * 4 / 64;
  for (double v : r.exact) EXPECT_NEAR(std::round((v + 1) * mean), (v + 1) * mean, 1e-9);
}

TEST(CostQb, SimulationRejectsBadOptions) {
  QbSimOptions o = small_sim();
  o.top_k = 64;
  EXPECT_THROW(qb_simulate(o), Error);
  o = small_sim();
  o.tokens = 8;
  EXPECT_THROW(qb_simulate(o), Error);
}

}  // namespace
}  // namespace k3::cost
