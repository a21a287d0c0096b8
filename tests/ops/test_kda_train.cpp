// The training path's chunked KDA (ops/kda/kda_chunked_train.h): its forward against the
// double recurrence (the reference of every KDA form) and its saved-chunk backward against
// kda_chunked_bwd, bit for bit, over chunk lengths that divide T, leave tails and exceed it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/harness.h"
#include "ops/kda/kda.h"
#include "ops/kda/kda_chunked_train.h"
#include "ops/norm/norm.h"

namespace k3::test {
namespace {

struct Data {
  std::vector<float> q, k, v, g, beta, S0;
  KdaInputs in() const { return {q.data(), k.data(), v.data(), g.data(), beta.data()}; }
};

// As the layer produces them: unit q (scaled) and k, g in (−5, 0) mostly mild, β in (0, 1).
Data make(std::mt19937_64& rng, KdaShape s) {
  Data d;
  d.q = randn(rng, s.T * s.H * s.K);
  d.k = randn(rng, s.T * s.H * s.K);
  l2_norm(d.q.data(), s.T * s.H, s.K, 1e-6f);
  l2_norm(d.k.data(), s.T * s.H, s.K, 1e-6f);
  for (float& x : d.q) x /= std::sqrt(static_cast<float>(s.K));
  d.v = randn(rng, s.T * s.H * s.V);
  d.g = randu(rng, s.T * s.H * s.K, -5.0, -1e-3);
  for (float& x : d.g) x = x < -4.0f ? x : x * 0.05f;
  d.beta = randu(rng, s.T * s.H, 0.05, 0.95);
  d.S0 = randn(rng, s.H * s.K * s.V, 0.3);
  return d;
}

struct Case {
  KdaShape s;
  int64_t chunk;
  bool from_state;
};

const Case kCases[] = {{{1, 1, 8, 8}, 64, false},    {{2, 1, 1, 1}, 1, true},
                       {{9, 2, 8, 6}, 4, true},      {{13, 1, 6, 5}, 5, false},
                       {{64, 2, 16, 16}, 64, true},  {{70, 3, 16, 8}, 64, false},
                       {{130, 2, 32, 32}, 64, true}, {{40, 1, 4, 4}, 100, true}};

std::string name(const Case& c) {
  return "T=" + std::to_string(c.s.T) + " H=" + std::to_string(c.s.H) +
         " K=" + std::to_string(c.s.K) + " V=" + std::to_string(c.s.V) +
         " C=" + std::to_string(c.chunk) + (c.from_state ? " S0" : "");
}

TEST(KdaTrain, ForwardMatchesTheRecurrence) {
  std::mt19937_64 rng(23);
  for (const Case& c : kCases) {
    const KdaShape s = c.s;
    const Data d = make(rng, s);
    const float* S0 = c.from_state ? d.S0.data() : nullptr;
    std::vector<float> o(s.T * s.H * s.V), S(s.H * s.K * s.V, 7.0f);
    kda_chunked_train_fwd(d.in(), s, S0, S.data(), o.data(), c.chunk);
    std::vector<float> o_ref(o.size()), S_ref = c.from_state ? d.S0 : std::vector<float>(S.size());
    kda_recurrent_ref(d.in(), s, S_ref.data(), o_ref.data());
    // The chunked op's tolerance (test_kda_conv.cpp): 2e-5 of the largest magnitude.
    double scale_o = 0, scale_S = 0;
    for (float x : o_ref) scale_o = std::max(scale_o, double(std::fabs(x)));
    for (float x : S_ref) scale_S = std::max(scale_S, double(std::fabs(x)));
    for (size_t i = 0; i < o.size(); ++i)
      ASSERT_NEAR(o[i], o_ref[i], 2e-5 * scale_o) << name(c) << " o[" << i << "]";
    for (size_t i = 0; i < S.size(); ++i)
      ASSERT_NEAR(S[i], S_ref[i], 2e-5 * scale_S) << name(c) << " S[" << i << "]";
  }
}

TEST(KdaTrain, SavedBackwardEqualsTheRecomputingOne) {
  std::mt19937_64 rng(29);
  for (const Case& c : kCases) {
    const KdaShape s = c.s;
    const Data d = make(rng, s);
    const float* S0 = c.from_state ? d.S0.data() : nullptr;
    const std::vector<float> d_o = randn(rng, s.T * s.H * s.V);
    std::vector<float> o(s.T * s.H * s.V);
    const auto saved = kda_chunked_train_fwd(d.in(), s, S0, nullptr, o.data(), c.chunk);
    // Gradient buffers start non-zero: both must add.
    std::vector<std::vector<float>> a = {randn(rng, d.q.size()), randn(rng, d.k.size()),
                                         randn(rng, d.v.size()), randn(rng, d.g.size()),
                                         randn(rng, d.beta.size())};
    std::vector<std::vector<float>> b = a;
    kda_chunked_bwd_saved(*saved, s, d_o.data(),
                          {a[0].data(), a[1].data(), a[2].data(), a[3].data(), a[4].data()});
    kda_chunked_bwd(d.in(), s, S0, d_o.data(),
                    {b[0].data(), b[1].data(), b[2].data(), b[3].data(), b[4].data()}, c.chunk);
    for (size_t t = 0; t < a.size(); ++t) {
      for (size_t i = 0; i < a[t].size(); ++i)
        ASSERT_EQ(a[t][i], b[t][i]) << name(c) << " gradient " << t << " at " << i;
    }
  }
}

TEST(KdaTrain, RejectsASavedForwardOfAnotherShape) {
  std::mt19937_64 rng(31);
  const KdaShape s{8, 1, 4, 4};
  const Data d = make(rng, s);
  std::vector<float> o(8 * 4), d_o(16 * 4, 1.0f), gq(16 * 4), gk(16 * 4), gv(16 * 4), gg(16 * 4),
      gb(16);
  const auto saved = kda_chunked_train_fwd(d.in(), s, nullptr, nullptr, o.data(), 4);
  EXPECT_THROW(kda_chunked_bwd_saved(*saved, {16, 1, 4, 4}, d_o.data(),
                                     {gq.data(), gk.data(), gv.data(), gg.data(), gb.data()}),
               Error);
}

}  // namespace
}  // namespace k3::test
