// Router, RMS norms and SiTU-GLU against plain references and the spec's closed forms.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "ops/harness.h"
#include "ops/moe/router.h"
#include "ops/norm/norm.h"
#include "ops/situ/situ.h"

namespace k3::test {
namespace {

// Plain router: full sort of biased scores, weights from unbiased scores (spec §6.3).
void route_ref(const std::vector<float>& logits, const std::vector<float>& bias, RouterParams p,
               std::vector<int32_t>& sel, std::vector<double>& w) {
  std::vector<double> s(p.n_expert);
  for (int64_t e = 0; e < p.n_expert; ++e) s[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
  std::vector<int32_t> order(p.n_expert);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return s[a] + bias[a] > s[b] + bias[b]; });
  sel.assign(order.begin(), order.begin() + p.top_k);
  std::sort(sel.begin(), sel.end());
  double sum = 0;
  for (int32_t e : sel) sum += s[e];
  w.clear();
  for (int32_t e : sel) {
    w.push_back(((p.renormalize && p.top_k > 1) ? s[e] / sum : s[e]) * p.scale);
  }
}

OpCase router_case(RouterParams p) {
  std::string shape = "E=" + std::to_string(p.n_expert) + " k=" + std::to_string(p.top_k) +
                      " renorm=" + std::to_string(p.renormalize) +
                      " scale=" + std::to_string(p.scale).substr(0, 3);
  return {"router", shape, 1e-6, [=](std::mt19937_64& rng) {
            std::vector<float> got;
            std::vector<double> want;
            for (int t = 0; t < 20; ++t) {
              std::vector<float> logits = randn(rng, p.n_expert, 2.0);
              std::vector<float> bias = randn(rng, p.n_expert, 0.1);
              std::vector<int32_t> sel(p.top_k), sel_ref;
              std::vector<float> w(p.top_k);
              std::vector<double> w_ref;
              route_token(logits.data(), bias.data(), p, sel.data(), w.data());
              route_ref(logits, bias, p, sel_ref, w_ref);
              for (int64_t j = 0; j < p.top_k; ++j) {  // a wrong id poisons the output with NaN
                got.push_back(sel[j] == sel_ref[j] ? w[j] : NAN);
                want.push_back(w_ref[j]);
              }
            }
            return Outputs{got, want};
          }};
}

OpCase rms_case(int64_t rows, int64_t n, bool gated) {
  std::string shape = "rows=" + std::to_string(rows) + " n=" + std::to_string(n);
  return {gated ? "gated_rms_norm" : "rms_norm", shape, 2e-6, [=](std::mt19937_64& rng) {
            std::vector<float> x = randn(rng, rows * n, 3.0), z = randn(rng, rows * n, 2.0);
            std::vector<float> w = randu(rng, n, 0.5, 1.5), y(rows * n);
            std::vector<double> want(rows * n);
            if (gated)
              gated_rms_norm(x.data(), z.data(), rows, n, w.data(), 1e-5f, y.data());
            else
              rms_norm(x.data(), rows, n, w.data(), 1e-5f, y.data());
            for (int64_t r = 0; r < rows; ++r) {
              double ss = 0;
              for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
              const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
              for (int64_t i = 0; i < n; ++i) {
                double g = gated ? 1.0 / (1.0 + std::exp(-double(z[r * n + i]))) : 1.0;
                want[r * n + i] = x[r * n + i] * inv * w[i] * g;
              }
            }
            return Outputs{y, want};
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
    v.push_back(router_case(p));
  }
  for (auto [rows, n] : {std::pair{1, 1}, {3, 16}, {5, 128}, {2, 7168}}) {
    v.push_back(rms_case(rows, n, false));
    v.push_back(rms_case(rows, n, true));
  }
  v.push_back({"situ_glu", "n=4096", 2e-6, [](std::mt19937_64& rng) {
                 std::vector<float> a = randn(rng, 4096, 10.0), b = randn(rng, 4096, 40.0);
                 std::vector<float> y(4096);
                 std::vector<double> want(4096);
                 situ_glu(a.data(), b.data(), 4096, {4.0f, 25.0f}, y.data());
                 for (int i = 0; i < 4096; ++i) want[i] = situ_glu_ref(a[i], b[i], {4.0f, 25.0f});
                 return Outputs{y, want};
               }});
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

}  // namespace
}  // namespace k3::test
