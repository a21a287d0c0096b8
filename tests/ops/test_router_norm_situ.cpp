// Router, RMS/L2 norms and SiTU-GLU against their references, and the spec's closed forms.
#include <gtest/gtest.h>

#include <cmath>

#include "core/cpu_isa.h"
#include "ops/harness.h"
#include "ops/moe/router.h"
#include "ops/norm/norm.h"
#include "ops/situ/situ.h"

namespace k3::test {
namespace {

// T tokens routed at once; a selected id that differs from the reference's poisons that
// weight with NaN.
OpCase router_case(RouterParams p, int64_t T) {
  std::string shape = "T=" + std::to_string(T) + " E=" + std::to_string(p.n_expert) +
                      " k=" + std::to_string(p.top_k) + " renorm=" + std::to_string(p.renormalize) +
                      " scale=" + std::to_string(p.scale).substr(0, 3);
  return {"router", shape, 1e-6, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> logits = randn(rng, T * p.n_expert, 2.0);
            std::vector<float> bias = randn(rng, p.n_expert, 0.1);
            std::vector<int32_t> sel(T * p.top_k), sel_ref(T * p.top_k);
            std::vector<float> w(T * p.top_k), w_ref(T * p.top_k);
            kRouterOp.get(impl)(logits.data(), bias.data(), p, T, sel.data(), w.data());
            kRouterOp.ref(logits.data(), bias.data(), p, T, sel_ref.data(), w_ref.data());
            for (size_t j = 0; j < w.size(); ++j) w[j] = sel[j] == sel_ref[j] ? w[j] : NAN;
            return Outputs{w, widen(w_ref)};
          }};
}

std::string rows_shape(int64_t rows, int64_t n, bool in_place) {
  return "rows=" + std::to_string(rows) + " n=" + std::to_string(n) + (in_place ? " in_place" : "");
}

// `in_place` writes y over x.
OpCase rms_case(int64_t rows, int64_t n, bool in_place) {
  return {"rms_norm", rows_shape(rows, n, in_place), 2e-6, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> x = randn(rng, rows * n, 3.0), w = randu(rng, n, 0.5, 1.5);
            std::vector<float> y(rows * n), want(rows * n);
            kRmsNormOp.ref(x.data(), rows, n, w.data(), 1e-5f, want.data());
            float* out = in_place ? x.data() : y.data();
            kRmsNormOp.get(impl)(x.data(), rows, n, w.data(), 1e-5f, out);
            return Outputs{in_place ? x : y, widen(want)};
          }};
}

OpCase gated_rms_case(int64_t rows, int64_t n, bool in_place) {
  return {"gated_rms_norm", rows_shape(rows, n, in_place), 2e-6,
          [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> x = randn(rng, rows * n, 3.0), z = randn(rng, rows * n, 2.0);
            std::vector<float> w = randu(rng, n, 0.5, 1.5), y(rows * n), want(rows * n);
            kGatedRmsNormOp.ref(x.data(), z.data(), rows, n, w.data(), 1e-5f, want.data());
            float* out = in_place ? x.data() : y.data();
            kGatedRmsNormOp.get(impl)(x.data(), z.data(), rows, n, w.data(), 1e-5f, out);
            return Outputs{in_place ? x : y, widen(want)};
          }};
}

OpCase l2_case(int64_t rows, int64_t n, bool in_place) {
  return {"l2_norm", rows_shape(rows, n, in_place), 2e-6, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> x = randn(rng, rows * n, 3.0), y(rows * n), want(rows * n);
            kL2NormOp.ref(x.data(), rows, n, 1e-6f, want.data());
            kL2NormOp.get(impl)(x.data(), rows, n, 1e-6f, in_place ? x.data() : y.data());
            return Outputs{in_place ? x : y, widen(want)};
          }};
}

// Gates and ups wide enough to reach both soft caps; `in_place` writes over the gate.
OpCase situ_case(int64_t n, bool in_place) {
  std::string shape = "n=" + std::to_string(n) + (in_place ? " in_place" : "");
  return {"situ_glu", shape, 2e-6, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> a = randn(rng, n, 10.0), b = randn(rng, n, 40.0), y(n), want(n);
            const SituParams p{4.0f, 25.0f};
            kSituGluOp.ref(a.data(), b.data(), n, p, want.data());
            kSituGluOp.get(impl)(a.data(), b.data(), n, p, in_place ? a.data() : y.data());
            return Outputs{in_place ? a : y, widen(want)};
          }};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  for (RouterParams p : {RouterParams{1, 1, true, 1.0f},
                         {6, 2, true, 1.0f},
                         {10, 3, true, 1.5f},
                         {8, 1, true, 2.5f},
                         {4, 4, true, 1.0f},
                         {896, 16, true, 1.0f},
                         {16, 4, false, 1.0f}}) {
    for (int64_t T : {1, 20}) v.push_back(router_case(p, T));
  }
  v.push_back(router_case({896, 16, true, 2.5f}, 70));  // above the threading threshold
  for (auto [rows, n] : {std::pair{1, 1}, {3, 16}, {4, 17}, {5, 128}, {2, 7168}}) {
    for (bool in_place : {false, true}) {
      v.push_back(rms_case(rows, n, in_place));
      v.push_back(gated_rms_case(rows, n, in_place));
      v.push_back(l2_case(rows, n, in_place));
    }
  }
  for (int64_t n : {1, 15, 17, 4096}) {
    v.push_back(situ_case(n, false));
    v.push_back(situ_case(n, true));
  }
  return v;
}

static Register reg(cases());

TEST(Router, BiasSelectsButDoesNotWeigh) {
  // spec §11.4 item 4: a huge bias on expert 0 forces its selection; weights still come from
  // the unbiased sigmoid scores.
  std::vector<float> logits = {-3.0f, 2.0f, 1.0f, 0.5f}, bias = {100.0f, 0, 0, 0};
  int32_t sel[2];
  float w[2];
  route_token(logits.data(), bias.data(), {4, 2, true, 1.0f}, sel, w);
  EXPECT_EQ(sel[0], 0);
  EXPECT_EQ(sel[1], 1);
  const double s0 = 1 / (1 + std::exp(3.0)), s1 = 1 / (1 + std::exp(-2.0));
  EXPECT_NEAR(w[0], s0 / (s0 + s1), 1e-6);
  EXPECT_NEAR(w[1], s1 / (s0 + s1), 1e-6);
}

TEST(Router, TopOneKeepsTheRawScore) {
  std::vector<float> logits = {0.3f, -1.0f, 2.0f}, bias = {0, 0, 0};
  int32_t sel;
  float w;
  route_token(logits.data(), bias.data(), {3, 1, true, 2.5f}, &sel, &w);
  EXPECT_EQ(sel, 2);
  EXPECT_NEAR(w, 2.5 / (1 + std::exp(-2.0)), 1e-6);
}

TEST(Router, BatchedEqualsPerToken) {
  std::mt19937_64 rng(9);
  const RouterParams p{32, 4, true, 1.5f};
  std::vector<float> logits = randn(rng, 5 * 32, 2.0), bias = randn(rng, 32, 0.1);
  std::vector<int32_t> sel(5 * 4), sel1(4);
  std::vector<float> w(5 * 4), w1(4);
  route_tokens(logits.data(), bias.data(), p, 5, sel.data(), w.data());
  for (int64_t t = 0; t < 5; ++t) {
    route_token(logits.data() + t * 32, bias.data(), p, sel1.data(), w1.data());
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(sel[t * 4 + j], sel1[j]);
      EXPECT_EQ(w[t * 4 + j], w1[j]);
    }
  }
}

TEST(Norms, ReferencesMatchClosedForms) {
  const float x[2] = {3, 4}, z[2] = {0, 0}, w[2] = {1, 2};
  float y[2];
  l2_norm_ref(x, 1, 2, 0.0f, y);  // (3, 4) / 5
  EXPECT_FLOAT_EQ(y[0], 0.6f);
  EXPECT_FLOAT_EQ(y[1], 0.8f);
  rms_norm_ref(x, 1, 2, w, 0.0f, y);  // w ⊙ x / sqrt(12.5)
  EXPECT_FLOAT_EQ(y[0], float(3 / std::sqrt(12.5)));
  EXPECT_FLOAT_EQ(y[1], float(8 / std::sqrt(12.5)));
  gated_rms_norm_ref(x, z, 1, 2, w, 0.0f, y);  // σ(0) = 1/2
  EXPECT_FLOAT_EQ(y[0], float(1.5 / std::sqrt(12.5)));
  EXPECT_FLOAT_EQ(y[1], float(4 / std::sqrt(12.5)));
}

TEST(L2Norm, InPlaceOverloadEqualsOutOfPlace) {
  std::mt19937_64 rng(10);
  std::vector<float> x = randn(rng, 3 * 40), y(x.size());
  l2_norm(x.data(), 3, 40, 1e-6f, y.data());
  l2_norm(x.data(), 3, 40, 1e-6f);
  EXPECT_EQ(x, y);
}

TEST(Situ, ClosedFormValuesFromSpec) {
  // spec §11.1 table (β₁ = 4, β₂ = 25).
  const SituParams p{4.0f, 25.0f};
  EXPECT_NEAR(situ_glu_ref(40, 40, p), 92.16686, 5e-5);
  EXPECT_NEAR(situ_glu_ref(2, 3, p), 4.86107, 5e-6);
  EXPECT_NEAR(situ_glu_ref(1, 1, p), 0.715818, 5e-7);
  EXPECT_NEAR(situ_glu_ref(-1, 1, p), -0.263335, 5e-7);
  EXPECT_NEAR(situ_glu_ref(10, 10, p), 37.48461, 5e-5);
  EXPECT_EQ(situ_glu_ref(0, 123.0, p), 0.0);
  float a[] = {40, 2, 1, -1, 10}, b[] = {40, 3, 1, 1, 10}, y[5];
  situ_glu(a, b, 5, p, y);
  const double want[] = {92.16686, 4.86107, 0.715818, -0.263335, 37.48461};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(y[i], want[i], 2e-6 * std::fabs(want[i]) + 1e-6);
}

// Beyond the harness's normwise check: every value is close relative to itself, over inputs from
// 1e-5 (where tanh's cancellation would show) to beyond both soft caps, on every path.
TEST(SituGlu, EveryPathIsAccurateValueByValue) {
  const Isa saved = active_isa();
  std::mt19937_64 rng(11);
  std::vector<float> a, b;
  for (double scale : {1e-5, 1e-3, 0.1, 0.3, 1.0, 4.0, 30.0, 200.0}) {
    std::normal_distribution<double> d(0.0, scale);
    for (int i = 0; i < 997; ++i) a.push_back(float(d(rng))), b.push_back(float(d(rng) * 3));
  }
  const SituParams p{4.0f, 25.0f};
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    std::vector<float> y(a.size());
    situ_glu(a.data(), b.data(), int64_t(a.size()), p, y.data());
    for (size_t i = 0; i < a.size(); ++i) {
      const double want = situ_glu_ref(a[i], b[i], p);
      if (a[i] < -60) {  // σ(a) underflows: only the absolute error is meaningful
        EXPECT_LE(std::fabs(y[i] - want), 1e-24) << isa_name(isa) << " a=" << a[i];
        continue;
      }
      EXPECT_LE(std::fabs(y[i] - want), 2e-6 * std::fabs(want) + 1e-37)
          << isa_name(isa) << " a=" << a[i] << " b=" << b[i];
    }
  }
  set_isa(saved);
}

}  // namespace
}  // namespace k3::test
