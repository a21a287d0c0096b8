// Element-wise ops, the KDA-free MoE data movement (gathers, the fp32 combine) against their
// references, in place where the op allows it; and the cpu versions bit-identical to the
// float expressions the model used inline.
#include <gtest/gtest.h>

#include "ops/copy/copy.h"
#include "ops/elementwise/elementwise.h"
#include "ops/harness.h"
#include "ops/moe/moe_combine.h"

namespace k3::test {
namespace {

// Lengths: one element, tails off every SIMD width, and one above the threading threshold.
constexpr int64_t kLengths[] = {1, 7, 16, 17, 1000, (int64_t{1} << 15) + 3};

std::string n_shape(int64_t n, bool in_place) {
  return "n=" + std::to_string(n) + (in_place ? " in_place" : "");
}

// Unary ops: y = op(x), or x = op(x) when in place.
template <typename Run>
OpCase unary_case(const char* op, int64_t n, bool in_place, double scale, Run run) {
  return {op, n_shape(n, in_place), 1e-6, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> x = randn(rng, n, scale), y(n), want(n);
            run(Impl::ref, x.data(), n, want.data());
            run(impl, x.data(), n, in_place ? x.data() : y.data());
            return Outputs{in_place ? x : y, widen(want)};
          }};
}

// Binary ops: y = op(a, b), or a = op(a, b) when in place.
template <typename Run>
OpCase binary_case(const char* op, int64_t n, bool in_place, Run run) {
  return {op, n_shape(n, in_place), 1e-6, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> a = randn(rng, n, 2.0), b = randn(rng, n, 3.0), y(n), want(n);
            run(Impl::ref, a.data(), b.data(), n, want.data());
            run(impl, a.data(), b.data(), n, in_place ? a.data() : y.data());
            return Outputs{in_place ? a : y, widen(want)};
          }};
}

void add_elementwise_cases(std::vector<OpCase>& v) {
  for (int64_t n : kLengths) {
    for (bool in_place : {false, true}) {
      v.push_back(unary_case(
          "sigmoid", n, in_place, 4.0,
          [](Impl i, const float* x, int64_t m, float* y) { kSigmoidOp.get(i)(x, m, y); }));
      v.push_back(
          unary_case("scale", n, in_place, 1.0, [](Impl i, const float* x, int64_t m, float* y) {
            kScaleOp.get(i)(x, m, 0.0883883f, y);
          }));
      v.push_back(binary_case("add", n, in_place,
                              [](Impl i, const float* a, const float* b, int64_t m, float* y) {
                                kAddOp.get(i)(a, b, m, y);
                              }));
      v.push_back(binary_case("mul_sigmoid", n, in_place,
                              [](Impl i, const float* a, const float* b, int64_t m, float* y) {
                                kMulSigmoidOp.get(i)(a, b, m, y);
                              }));
    }
  }
}

std::string moe_shape(int64_t T, int64_t k, int64_t n, int64_t width) {
  return "T=" + std::to_string(T) + " k=" + std::to_string(k) + " n=" + std::to_string(n) +
         " width=" + std::to_string(width);
}

OpCase gather_rows_case(int64_t T, int64_t n, int64_t width) {
  return {"gather_rows", moe_shape(T, 1, n, width), 0, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> src = randn(rng, T * width), got(n * width), want(n * width);
            std::uniform_int_distribution<int64_t> row(0, T - 1);
            std::vector<int64_t> rows(n);
            for (int64_t& r : rows) r = row(rng);  // repeats allowed
            kGatherRowsOp.ref(src.data(), rows.data(), n, width, want.data());
            kGatherRowsOp.get(impl)(src.data(), rows.data(), n, width, got.data());
            return Outputs{got, widen(want)};
          }};
}

// Rows to separate destinations: src [n, width] into n rows of a larger buffer in a random order
// (some destination rows untouched: kept), as latent rows go to their cache blocks.
OpCase scatter_rows_case(int64_t n, int64_t width, int64_t spare) {
  return {"scatter_rows", moe_shape(n + spare, 1, n, width), 0,
          [=](std::mt19937_64& rng, Impl impl) {
            const int64_t R = n + spare;
            std::vector<float> src = randn(rng, n * width), got = randn(rng, R * width);
            std::vector<float> want = got;
            std::vector<int64_t> order(static_cast<size_t>(R));
            for (int64_t i = 0; i < R; ++i) order[i] = i;
            std::shuffle(order.begin(), order.end(), rng);
            std::vector<float*> rows(n), rows_ref(n);
            for (int64_t i = 0; i < n; ++i) {
              rows[i] = got.data() + order[i] * width;
              rows_ref[i] = want.data() + order[i] * width;
            }
            kScatterRowsOp.ref(src.data(), n, width, rows_ref.data());
            kScatterRowsOp.get(impl)(src.data(), n, width, rows.data());
            return Outputs{got, widen(want)};
          }};
}

OpCase gather_choice_case(int64_t T, int64_t k, int64_t n, int64_t width) {
  return {"gather_choice_rows", moe_shape(T, k, n, width), 0, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> src = randn(rng, T * width), got(n * width), want(n * width);
            std::vector<int64_t> choice = rand_choices(rng, T, k, n);
            kGatherChoiceRowsOp.ref(src.data(), choice.data(), n, k, width, want.data());
            kGatherChoiceRowsOp.get(impl)(src.data(), choice.data(), n, k, width, got.data());
            return Outputs{got, widen(want)};
          }};
}

// The combine starts from a non-zero c (earlier experts' contributions); error scale
// Σ|terms| per element, as for any fp32 sum.
OpCase scatter_add_case(int64_t T, int64_t k, int64_t n, int64_t width) {
  return {"moe_scatter_add", moe_shape(T, k, n, width), 1e-6, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> y = randn(rng, n * width), weight = randu(rng, T * k, 0.05, 1.0);
            std::vector<float> c = randn(rng, T * width), want = c;
            std::vector<int64_t> choice = rand_choices(rng, T, k, n);
            std::vector<double> mag(c.begin(), c.end());
            for (double& m : mag) m = std::fabs(m);
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < width; ++j)
                mag[(choice[i] / k) * width + j] += std::fabs(weight[choice[i]] * y[i * width + j]);
            kMoeScatterAddOp.ref(y.data(), choice.data(), weight.data(), n, k, width, want.data());
            kMoeScatterAddOp.get(impl)(y.data(), choice.data(), weight.data(), n, k, width,
                                       c.data());
            return Outputs{c, widen(want), *std::max_element(mag.begin(), mag.end())};
          }};
}

void add_moe_cases(std::vector<OpCase>& v) {
  v.push_back(scatter_rows_case(0, 5, 2));      // nothing to move
  v.push_back(scatter_rows_case(64, 576, 3));   // a decode step's latent rows
  v.push_back(scatter_rows_case(300, 576, 0));  // a prompt chunk's (above the threading bound)
  for (auto [T, k, n, width] : {std::tuple{1, 1, 1, 1},
                                {1, 4, 4, 7},
                                {5, 2, 3, 16},
                                {9, 3, 20, 33},
                                {16, 8, 128, 256},
                                {64, 8, 300, 520}}) {  // above the threading threshold
    v.push_back(gather_rows_case(T, n, width));
    v.push_back(scatter_rows_case(n, width, T % 3));
    v.push_back(gather_choice_case(T, k, n, width));
    v.push_back(scatter_add_case(T, k, n, width));
  }
}

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  add_elementwise_cases(v);
  add_moe_cases(v);
  return v;
}

static Register reg(cases());

// scale and add: the model's inline expressions before it called these ops, bit for bit. The
// sigmoids go through fast_math.h's e^x: within 4e-7 relative of the float64 value at every
// element (arguments far into saturation), 5e-7 with mul_sigmoid's product rounded.
TEST(Elementwise, MatchesTheModelsInlineCodeAndTheSigmoidBound) {
  auto near = [](const std::vector<float>& got, const std::vector<float>& want, double rel,
                 const char* op, int64_t n) {
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], rel * std::abs(want[i]) + 1e-37) << op << " n=" << n << " " << i;
  };
  for (int64_t n : kLengths) {
    std::mt19937_64 rng(0xe1 + n);
    const std::vector<float> x = randn(rng, n, 4.0), g = randn(rng, n, 3.0);
    std::vector<float> y(n), want(n);
    sigmoid_f32(x.data(), n, y.data());
    for (int64_t i = 0; i < n; ++i)
      want[i] = static_cast<float>(1.0 / (1.0 + std::exp(-double(x[i]))));
    near(y, want, 4e-7, "sigmoid", n);
    const float s = 1.0f / std::sqrt(128.0f);
    scale_f32(x.data(), n, s, y.data());
    for (int64_t i = 0; i < n; ++i) (want[i] = x[i]) *= s;
    EXPECT_EQ(y, want) << "scale n=" << n;
    add_f32(x.data(), g.data(), n, y.data());
    for (int64_t i = 0; i < n; ++i) (want[i] = x[i]) += g[i];
    EXPECT_EQ(y, want) << "add n=" << n;
    mul_sigmoid_f32(x.data(), g.data(), n, y.data());
    for (int64_t i = 0; i < n; ++i)
      want[i] = static_cast<float>(x[i] / (1.0 + std::exp(-double(g[i]))));
    near(y, want, 5e-7, "mul_sigmoid", n);
  }
}

// The combine as moe_block summed it: one expert at a time, its rows in order.
TEST(MoeScatterAdd, BitIdenticalToTheModelsLoop) {
  const int64_t T = 40, k = 4, L = 1000;  // 37 rows x 1000: the threaded path
  std::mt19937_64 rng(0x5ca);
  std::vector<int64_t> choice = rand_choices(rng, T, k, T * k);
  std::vector<float> y = randn(rng, T * k * L), weight = randu(rng, T * k, 0.05, 1.0);
  std::vector<float> c(T * L, 0.0f), want(T * L, 0.0f);
  for (int64_t e0 = 0; e0 < T * k; e0 += 37) {  // "experts" of 37 choices
    const int64_t n = std::min<int64_t>(37, T * k - e0);
    moe_scatter_add(y.data() + e0 * L, choice.data() + e0, weight.data(), n, k, L, c.data());
    for (int64_t r = 0; r < n; ++r) {
      const float wt = weight[choice[e0 + r]];
      float* cr = want.data() + (choice[e0 + r] / k) * L;
      for (int64_t j = 0; j < L; ++j) cr[j] += wt * y[(e0 + r) * L + j];
    }
  }
  EXPECT_EQ(c, want);
}

}  // namespace
}  // namespace k3::test
