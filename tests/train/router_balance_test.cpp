// Router balancing for training: histogram vs exact quantiles on known distributions,
// micro-batch accumulation, padding, the 3x3 fixed point, and MaxVio on a skewed router.
#include "k3/router_balance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "k3/error.h"

namespace k3::balance {
namespace {

// Expert 0 scores (t + 0.5) / T, expert 1 scores ~0: at b = 0 and k = 1 every threshold is
// expert 1's score, so r_{.,0} = -(t + 0.5) / T (uniform on (-1, 0)) and r_{.,1} = 0.
Scores uniform_pair(int64_t tokens) {
  Scores sc{tokens, 2, {}};
  for (int64_t t = 0; t < tokens; ++t) {
    sc.s.push_back((static_cast<double>(t) + 0.5) / static_cast<double>(tokens));
    sc.s.push_back(1e-12);
  }
  return sc;
}

std::vector<double> run_one(const Scores& sc, BalancerConfig cfg) {
  RouterBalancer b(sc.experts, cfg);
  b.observe(sc);
  b.finish_step();
  return b.bias();
}

TEST(RouterBalance, KnownUniformQuantile) {
  // T = 1000, q = 500. paddle: alpha_t is expert 1's score, so r_{.,0} = -(t + 0.5) / T and
  // r_{.,1} = 0; b_0 is the 501st smallest r_{.,0}, -499.5/1000, b_1 = 0, then zero mean.
  // kth: alpha_t is expert 0's score, so r_{.,0} = 0 and r_{.,1} = (t + 0.5) / T (less 1e-12);
  // b_1 is its 500th smallest, 0.4995. The 100-bin histogram over [-1, 1] (20 values a bin):
  // paddle puts b_0 at -0.5 and b_1 half-way into the bin holding every r = 0, at 0.01; kth
  // puts b_0 at 0.01 and b_1 at the end of the 25th bin of (0, 1), 0.5.
  const Scores sc = uniform_pair(1000);
  std::vector<double> paddle = run_one(sc, {Method::qb_exact, 1, 0, QbConvention::paddle});
  EXPECT_NEAR(paddle[0], -0.4995 / 2, 1e-12);
  EXPECT_NEAR(paddle[1], 0.4995 / 2, 1e-12);
  std::vector<double> kth = run_one(sc, {Method::qb_exact, 1, 0, QbConvention::kth});
  EXPECT_NEAR(kth[0] - kth[1], -0.4995, 1e-11);
  std::vector<double> hp = run_one(sc, {Method::qb_histogram, 1, 100, QbConvention::paddle});
  EXPECT_NEAR(hp[0], (-0.5 - 0.01) / 2, 1e-12);
  EXPECT_NEAR(hp[1], (0.01 + 0.5) / 2, 1e-12);
  std::vector<double> hk = run_one(sc, {Method::qb_histogram, 1, 100, QbConvention::kth});
  EXPECT_NEAR(hk[0], (0.01 - 0.5) / 2, 1e-12);
  EXPECT_NEAR(hk[1], (0.5 - 0.01) / 2, 1e-12);
}

// Scores from a few shapes of distribution, to compare the histogram with exact quantiles.
Scores sample(int kind, int64_t tokens, int64_t experts, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0.001, 0.999);
  Scores sc{tokens, experts, {}};
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) {
      const double x = u(gen);
      switch (kind) {
        case 0:  // uniform
          sc.s.push_back(x);
          break;
        case 1:  // skewed toward 0, more so for later experts
          sc.s.push_back(std::pow(x, 1.0 + 0.5 * static_cast<double>(e)));
          break;
        case 2:  // bimodal
          sc.s.push_back(x < 0.5 ? 0.05 + 0.1 * x : 0.8 + 0.1 * x);
          break;
        default:  // heavy ties: four values
          sc.s.push_back(0.2 + 0.2 * std::floor(x * 4));
      }
    }
  }
  return sc;
}

TEST(RouterBalance, HistogramTracksExact) {
  for (int kind = 0; kind < 4; ++kind) {
    const Scores sc = sample(kind, 777, 12, 10 + static_cast<uint64_t>(kind));
    for (QbConvention c : {QbConvention::paddle, QbConvention::kth}) {
      const std::vector<double> exact = run_one(sc, {Method::qb_exact, 3, 0, c});
      for (int64_t bins : {16, 100, 1000, 100000}) {
        const std::vector<double> h = run_one(sc, {Method::qb_histogram, 3, bins, c});
        // The exact value lies in the quantile bin; the mean shift adds up to one more width.
        const double width = 2.0 / static_cast<double>(bins);
        for (size_t e = 0; e < exact.size(); ++e) {
          EXPECT_NEAR(h[e], exact[e], 2 * width) << "kind " << kind << " bins " << bins;
        }
        EXPECT_NEAR(std::accumulate(h.begin(), h.end(), 0.0), 0.0, 1e-12);
      }
    }
  }
}

TEST(RouterBalance, MatchesTheOneShotFunctions) {
  const Scores sc = sample(0, 300, 8, 3);
  std::vector<double> b0(8, 0.0);
  EXPECT_EQ(run_one(sc, {Method::qb_exact, 2, 0, QbConvention::paddle}),
            qb_step(sc, 2, b0, 0, QbConvention::paddle));
  EXPECT_EQ(run_one(sc, {Method::qb_histogram, 2, 64, QbConvention::paddle}),
            qb_step(sc, 2, b0, 64, QbConvention::paddle));
  const Routing r = route(sc, 2, b0, QbConvention::paddle);
  EXPECT_EQ(run_one(sc, {Method::loss_free, 2, 0, QbConvention::paddle, 0.01}),
            loss_free_update(r.loads, 300, 2, b0, 0.01));
  EXPECT_EQ(run_one(sc, {Method::none, 2}), b0);
}

TEST(RouterBalance, MicroBatchesSumAndPaddingIsExcluded) {
  // One step over three micro-batches (with padding rows mixed in) equals one step over the
  // concatenated real tokens, in every method; the histogram counts are the sums.
  const Scores all = sample(1, 240, 10, 5);
  for (Method m : {Method::qb_histogram, Method::qb_exact, Method::loss_free, Method::none}) {
    BalancerConfig cfg{m, 3, 50};
    RouterBalancer whole(10, cfg), parts(10, cfg);
    for (RouterBalancer* b : {&whole, &parts}) b->set_bias(std::vector<double>(10, 0.0));
    std::vector<double> warm = run_one(sample(1, 200, 10, 6), {Method::qb_exact, 3, 0});
    whole.set_bias(warm);  // a non-zero bias moves the histogram range off [-1, 1]
    parts.set_bias(warm);
    whole.observe(all);
    for (int p = 0; p < 3; ++p) {
      std::vector<float> s;
      std::vector<uint8_t> valid;
      for (int64_t t = p * 80; t < (p + 1) * 80; ++t) {
        for (int pad = 0; pad < (t % 7 == 0 ? 1 : 0); ++pad) {  // a padding row of junk
          s.insert(s.end(), 10, 0.99f);
          valid.push_back(0);
        }
        for (int64_t e = 0; e < 10; ++e) s.push_back(static_cast<float>(all.at(t, e)));
        valid.push_back(1);
      }
      parts.observe(s, static_cast<int64_t>(valid.size()), valid);
    }
    // Float storage rounds the scores: compare against a float-rounded whole batch.
    Scores rounded = all;
    for (double& x : rounded.s) x = static_cast<float>(x);
    RouterBalancer ref(10, cfg);
    ref.set_bias(warm);
    ref.observe(rounded);
    if (m == Method::qb_histogram) {
      EXPECT_EQ(parts.counts(), ref.counts());
    }
    const StepStats sp = parts.finish_step(), sr = ref.finish_step();
    EXPECT_EQ(sp.tokens, 240);
    EXPECT_EQ(sp.loads, sr.loads) << method_name(m);
    EXPECT_EQ(parts.bias(), ref.bias()) << method_name(m);
    const StepStats sw = whole.finish_step();
    EXPECT_EQ(sw.tokens, 240);
    EXPECT_NEAR(sw.max_vio, sp.max_vio, 0.1) << method_name(m);  // rounding moves few tokens
  }
}

TEST(RouterBalance, AddCountsPoolsWorkers) {
  const Scores a = sample(0, 120, 6, 8), b = sample(0, 90, 6, 9);
  BalancerConfig cfg{Method::qb_histogram, 2, 40};
  RouterBalancer w0(6, cfg), w1(6, cfg), pooled(6, cfg);
  w0.observe(a);
  w1.observe(b);
  pooled.observe(a);
  pooled.observe(b);
  w0.add_counts(w1.counts(), 90);
  EXPECT_EQ(w0.counts(), pooled.counts());
  w0.finish_step();
  pooled.finish_step();
  EXPECT_EQ(w0.bias(), pooled.bias());
}

// The 3x3 example ([A2]): tokens score experts as below, k = 1, T = N = 3.
double best_assignment(const Scores& sc) {
  std::vector<int> perm = {0, 1, 2};
  double best = -1e9;
  do {
    best = std::max(best, sc.at(0, perm[0]) + sc.at(1, perm[1]) + sc.at(2, perm[2]));
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

TEST(RouterBalance, ThreeByThreeFixedPoint) {
  const Scores sc{3, 3, {0, 0, 1, 0, 2, 0, 0, 3, 0}};
  EXPECT_DOUBLE_EQ(best_assignment(sc), 4);
  for (QbConvention c : {QbConvention::kth, QbConvention::paddle}) {
    RouterBalancer b(3, {Method::qb_exact, 1, 0, c});
    std::vector<double> prev = b.bias();
    int moves = 0;
    for (int i = 0; i < 50; ++i) {
      b.observe(sc);
      b.finish_step();
      double change = 0;
      for (size_t e = 0; e < 3; ++e) change = std::max(change, std::abs(b.bias()[e] - prev[e]));
      if (change < 1e-12) break;
      prev = b.bias();
      ++moves;
    }
    ASSERT_LT(moves, 50);  // a fixed point
    if (c == QbConvention::kth) {
      // One move to (2/3, -1/3, -1/3), then stuck with the dual at 5 above the optimum 4.
      EXPECT_EQ(moves, 1);
      EXPECT_NEAR(b.bias()[0], 2.0 / 3, 1e-12);
      EXPECT_NEAR(b.bias()[1], -1.0 / 3, 1e-12);
      EXPECT_NEAR(b.bias()[2], -1.0 / 3, 1e-12);
      EXPECT_NEAR(dual_objective(sc, 1, b.bias()), 5, 1e-12);
    } else {
      EXPECT_NEAR(dual_objective(sc, 1, b.bias()), 4, 1e-12);
    }
  }
}

// A skewed synthetic router: expert popularity offsets mu_e, fresh tokens every step.
Scores skewed_batch(int64_t tokens, const std::vector<double>& mu, std::mt19937_64& gen) {
  std::normal_distribution<double> z(0.0, 1.0);
  Scores sc{tokens, static_cast<int64_t>(mu.size()), {}};
  for (int64_t t = 0; t < tokens; ++t)
    for (double m : mu) sc.s.push_back(1 / (1 + std::exp(-(m + z(gen)))));
  return sc;
}

TEST(RouterBalance, MaxVioFallsUnderQb) {
  const int64_t experts = 32, k = 4, tokens = 1024, steps = 20;
  std::mt19937_64 gen(20260909);
  std::normal_distribution<double> z(0.0, 1.0);
  std::vector<double> mu(experts);
  for (double& m : mu) m = 1.0 * z(gen);
  std::vector<Scores> batches;
  for (int64_t s = 0; s < steps; ++s) batches.push_back(skewed_batch(tokens, mu, gen));
  auto run = [&](Method m) {
    RouterBalancer b(experts, {m, k, 1000, QbConvention::paddle, 1e-3});
    std::vector<double> vio;
    for (const Scores& sc : batches) {
      b.observe(sc);
      vio.push_back(b.finish_step().max_vio);
    }
    return vio;
  };
  auto tail = [](const std::vector<double>& v) {
    return std::accumulate(v.end() - 5, v.end(), 0.0) / 5;
  };
  const std::vector<double> none = run(Method::none), lf = run(Method::loss_free),
                            qb = run(Method::qb_histogram), qbx = run(Method::qb_exact);
  EXPECT_GT(none[0], 1.0);     // far from balance
  EXPECT_EQ(none[0], qb[0]);   // step 0 routes with b = 0 for every method
  EXPECT_GT(tail(none), 1.0);  // nothing balances it
  EXPECT_LT(tail(qb), none[0] / 5);
  EXPECT_LT(tail(qbx), none[0] / 5);
  EXPECT_LT(qb[2], 0.5 * lf[2]);  // QB has no step size; Loss-Free moves 1e-3 a step
  EXPECT_LT(tail(lf), none[0]);   // but it does move the right way
}

TEST(RouterBalance, BadInput) {
  EXPECT_THROW(RouterBalancer(1, {Method::qb_histogram, 1}), Error);
  EXPECT_THROW(RouterBalancer(4, {Method::qb_histogram, 4}), Error);
  EXPECT_THROW(RouterBalancer(4, {Method::qb_histogram, 1, 0}), Error);
  RouterBalancer b(4, {Method::qb_exact, 1});
  EXPECT_THROW(b.set_bias({0, 0}), Error);
  std::vector<float> s(7, 0.5f);
  EXPECT_THROW(b.observe(s, 2), Error);
  EXPECT_THROW(b.observe(Scores{1, 3, {0.1, 0.2, 0.3}}), Error);
  b.observe(Scores{1, 4, {0.1, 0.2, 0.3, 0.4}});
  EXPECT_THROW(b.set_bias({0, 0, 0, 0}), Error);  // mid-step
  EXPECT_EQ(parse_method("qb-exact"), Method::qb_exact);
  EXPECT_THROW(parse_method("aux-loss"), Error);
  // A step without tokens leaves the bias alone.
  RouterBalancer empty(4, {Method::qb_histogram, 1});
  EXPECT_EQ(empty.finish_step().tokens, 0);
  EXPECT_EQ(empty.bias(), std::vector<double>(4, 0.0));
}

}  // namespace
}  // namespace k3::balance
