// Each sampling step against a plain reference written here from the definitions in
// k3/sampler.h, on random logits with fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "core/error.h"
#include "k3/sampler.h"

namespace k3 {
namespace {

std::vector<float> random_logits(size_t n, uint64_t seed, float sd = 2.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> l(n);
  for (float& x : l) x = d(rng);
  return l;
}

// Reference softmax in double, in id order.
std::vector<double> ref_softmax(const std::vector<float>& l, double t = 1.0) {
  double mx = *std::max_element(l.begin(), l.end()) / t;
  std::vector<double> p(l.size());
  double sum = 0;
  for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp(l[i] / t - mx);
  for (double& x : p) x /= sum;
  return p;
}

// Ids sorted by probability (descending), then id.
std::vector<int32_t> ref_order(const std::vector<double>& p) {
  std::vector<int32_t> ids(p.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  return ids;
}

std::map<int32_t, double> as_map(const std::vector<Candidate>& c) {
  std::map<int32_t, double> m;
  for (const Candidate& x : c) m[x.id] = x.p;
  return m;
}

TEST(SamplePenalties, ChangeLogitsExactlyAsDefined) {
  std::vector<float> logits = random_logits(50, 1);
  const std::vector<int32_t> history = {3, 7, 7, 9, 3, 3, 12, 40, 41, 7, 49, 60, -1};
  const SamplingParams p{.repeat_penalty = 1.3f,
                         .presence_penalty = 0.5f,
                         .frequency_penalty = 0.25f,
                         .penalty_last_n = 10};
  std::vector<float> expected = logits;
  std::map<int32_t, int> count;  // the last 10 ids: 7 9 3 3 12 40 41 7 49 60 -1 minus the first
  for (size_t i = history.size() - 10; i < history.size(); ++i) ++count[history[i]];
  for (auto [id, c] : count) {
    if (id < 0 || id >= 50) continue;
    float l = expected[id];
    l = l > 0 ? l / 1.3f : l * 1.3f;
    expected[id] = l - 0.5f - 0.25f * static_cast<float>(c);
  }
  apply_penalties(logits, history, p);
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_FLOAT_EQ(logits[i], expected[i]) << "id " << i;
  EXPECT_EQ(count.count(3), 1u);
  EXPECT_EQ(count[3], 2);  // the first 3 of the history is outside the window
}

TEST(SamplePenalties, WindowWholeContextAndOff) {
  const std::vector<float> base = random_logits(10, 2);
  const std::vector<int32_t> history = {1, 2, 2};
  std::vector<float> l = base;
  apply_penalties(l, history, {.frequency_penalty = 1.0f, .penalty_last_n = 0});
  EXPECT_EQ(l, base);
  apply_penalties(l, history, {.frequency_penalty = 1.0f, .penalty_last_n = -1});
  EXPECT_FLOAT_EQ(l[1], base[1] - 1.0f);
  EXPECT_FLOAT_EQ(l[2], base[2] - 2.0f);
  EXPECT_EQ(l[0], base[0]);
}

TEST(SampleLogitBias, AddsAndBans) {
  std::vector<float> l = {1.0f, 2.0f, 3.0f};
  apply_logit_bias(l, {{0, 5.0f}, {2, -INFINITY}, {7, 1.0f}});
  EXPECT_EQ(l[0], 6.0f);
  EXPECT_EQ(l[1], 2.0f);
  EXPECT_EQ(l[2], -INFINITY);
  Sampler s({.temperature = 1.0f, .seed = 3}, {{0, -INFINITY}, {1, -INFINITY}});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(std::vector<float>{9, 9, -9}, {}), 2);
}

TEST(SampleGreedy, IsTheArgmaxOfThePenalisedLogits) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> l = random_logits(1000, seed);
    const int32_t best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    Sampler greedy({.temperature = 0.0f, .seed = seed});
    EXPECT_EQ(greedy.sample(l, {}), best);
    Sampler k1({.temperature = 1.0f, .top_k = 1, .seed = seed});
    EXPECT_EQ(k1.sample(l, {}), best);
    // A strong presence penalty on the best moves the arg-max elsewhere.
    Sampler penalised({.temperature = 0.0f, .presence_penalty = 100.0f});
    EXPECT_NE(penalised.sample(l, std::vector<int32_t>{best}), best);
  }
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}), 1);  // ties: lowest id
}

TEST(SampleTemperature, DistributionIsSoftmaxOfScaledLogits) {
  const std::vector<float> l = random_logits(300, 4);
  for (float t : {0.3f, 1.0f, 2.5f}) {
    Sampler s({.temperature = t, .top_p = 1.0f});
    const auto got = as_map(s.distribution(l, {}));
    const std::vector<double> ref = ref_softmax(l, t);
    ASSERT_EQ(got.size(), l.size());
    for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(got.at(int32_t(i)), ref[i], 1e-6);
  }
}

TEST(SampleTopK, KeepsExactlyTheKBestRenormalised) {
  const std::vector<float> l = random_logits(500, 5);
  const std::vector<double> p = ref_softmax(l, 0.7);
  const std::vector<int32_t> order = ref_order(p);
  for (int32_t k : {1, 2, 17, 499, 500, 800}) {
    Sampler s({.temperature = 0.7f, .top_k = k});
    const auto got = as_map(s.distribution(l, {}));
    const size_t kept = std::min<size_t>(size_t(k), l.size());
    ASSERT_EQ(got.size(), kept) << "k " << k;
    double mass = 0;
    for (size_t i = 0; i < kept; ++i) mass += p[order[i]];
    for (size_t i = 0; i < kept; ++i) EXPECT_NEAR(got.at(order[i]), p[order[i]] / mass, 1e-6);
  }
  // Draws never leave the k best.
  Sampler s({.temperature = 2.0f, .top_k = 5, .seed = 11});
  const std::set<int32_t> best(order.begin(), order.begin() + 5);
  std::set<int32_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(s.sample(l, {}));
  for (int32_t id : seen) EXPECT_TRUE(best.count(id)) << id;
  EXPECT_EQ(seen.size(), 5u);
}

TEST(SampleTopP, KeepsTheShortestPrefixWithTheMass) {
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const std::vector<float> l = random_logits(2000, 100 + seed, seed % 2 ? 0.5f : 3.0f);
    const std::vector<double> p = ref_softmax(l);
    const std::vector<int32_t> order = ref_order(p);
    for (float top_p : {0.05f, 0.5f, 0.9f, 0.999f}) {
      size_t n = 0;
      double mass = 0;
      while (mass < top_p) mass += p[order[n++]];
      Sampler s({.temperature = 1.0f, .top_p = top_p});
      const std::vector<Candidate> got = s.distribution(l, {});
      ASSERT_EQ(got.size(), n) << "top_p " << top_p << " seed " << seed;
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(got[i].id, order[i]);
        EXPECT_NEAR(got[i].p, p[order[i]] / mass, 1e-5);
      }
    }
  }
}

TEST(SampleMinP, KeepsTokensAboveTheThreshold) {
  const std::vector<float> l = random_logits(3000, 6);
  const std::vector<double> p = ref_softmax(l);
  const double p_max = *std::max_element(p.begin(), p.end());
  for (float min_p : {0.01f, 0.1f, 0.5f, 1.0f}) {
    Sampler s({.temperature = 1.0f, .top_p = 1.0f, .min_p = min_p});
    const auto got = as_map(s.distribution(l, {}));
    double mass = 0;
    size_t n = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] >= min_p * p_max * (1 + 1e-6)) {
        EXPECT_TRUE(got.count(int32_t(i))) << "min_p " << min_p << " dropped id " << i;
      }
      if (p[i] < min_p * p_max * (1 - 1e-6)) {
        EXPECT_FALSE(got.count(int32_t(i))) << "min_p " << min_p << " kept id " << i;
      }
      if (got.count(int32_t(i))) {
        mass += p[i];
        ++n;
      }
    }
    EXPECT_EQ(got.size(), n);
    for (auto [id, q] : got) EXPECT_NEAR(q, p[id] / mass, 1e-5);
  }
}

TEST(SampleChain, TopKThenTopPThenMinPOnRenormalisedMass) {
  const std::vector<float> l = random_logits(400, 7, 1.0f);
  const std::vector<double> p = ref_softmax(l, 1.5);
  const std::vector<int32_t> order = ref_order(p);
  // top-k 50, renormalise; top-p 0.6 of that; min-p 0.2 of the survivors' max.
  double m50 = 0;
  for (int i = 0; i < 50; ++i) m50 += p[order[i]];
  size_t n = 0;
  double mass = 0;
  while (mass < 0.6) mass += p[order[n++]] / m50;
  std::set<int32_t> expected;
  for (size_t i = 0; i < n; ++i) {
    if (p[order[i]] >= 0.2 * p[order[0]]) expected.insert(order[i]);
  }
  Sampler s({.temperature = 1.5f, .top_k = 50, .top_p = 0.6f, .min_p = 0.2f});
  const auto got = as_map(s.distribution(l, {}));
  std::set<int32_t> ids;
  double sum = 0;
  for (auto [id, pr] : got) {
    ids.insert(id);
    sum += pr;
  }
  EXPECT_EQ(ids, expected);
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

TEST(SampleDraw, FrequenciesMatchTheDistribution) {
  const std::vector<float> l = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};
  const std::vector<double> p = ref_softmax(l);
  Sampler s({.temperature = 1.0f, .top_p = 1.0f, .seed = 1234});
  std::vector<int> n(l.size());
  const int draws = 40000;
  for (int i = 0; i < draws; ++i) ++n[s.sample(l, {})];
  for (size_t i = 0; i < l.size(); ++i) {
    const double sd = std::sqrt(p[i] * (1 - p[i]) / draws);
    EXPECT_NEAR(double(n[i]) / draws, p[i], 5 * sd + 1e-4) << "id " << i;
  }
  EXPECT_EQ(draw({{.id = 4, .logit = 0, .p = 0.5f}, {.id = 2, .logit = 0, .p = 0.5f}}, 0.49), 4);
  EXPECT_EQ(draw({{.id = 4, .logit = 0, .p = 0.5f}, {.id = 2, .logit = 0, .p = 0.5f}}, 0.51), 2);
}

TEST(SampleSeed, SameSeedSameTokensOtherSeedOtherTokens) {
  auto run = [](uint64_t seed) {
    Sampler s({.temperature = 1.0f,
               .top_k = 40,
               .top_p = 0.9f,
               .min_p = 0.01f,
               .repeat_penalty = 1.1f,
               .seed = seed});
    std::vector<int32_t> out;
    for (uint64_t step = 0; step < 200; ++step)
      out.push_back(s.sample(random_logits(1000, step), out));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  // The generator is std::mt19937_64, whose output the C++ standard fixes: 53 high bits.
  Sampler s({.seed = 5489});
  EXPECT_EQ(s.next_uniform(), double(std::mt19937_64(5489)() >> 11) * 0x1.0p-53);
}

TEST(SampleValidate, RejectsOutOfRangeSettings) {
  EXPECT_THROW(Sampler({.top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.top_p = 1.5f}), Error);
  EXPECT_THROW(Sampler({.top_k = -1}), Error);
  EXPECT_THROW(Sampler({.min_p = -0.1f}), Error);
  EXPECT_THROW(Sampler({.repeat_penalty = 0.0f}), Error);
  EXPECT_THROW(Sampler({.penalty_last_n = -2}), Error);
  EXPECT_THROW(Sampler({.temperature = NAN}), Error);
  EXPECT_THROW(Sampler({}, {{1, INFINITY}}), Error);
  try {
    Sampler({.top_p = 2.0f});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p must be in (0, 1]"), std::string::npos);
  }
}

}  // namespace
}  // namespace k3
