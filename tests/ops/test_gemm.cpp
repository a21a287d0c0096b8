// gemm_acc (core/gemm.h) on every instruction-set path this CPU runs, against the plain double
// reference, on fresh random inputs: shapes of 0, 1, odd sizes, tails off every vector width
// and tile edge (4/6/8 rows, 16/32/64 columns, the 256-deep and 256-wide cache blocks), both
// layouts of A, and leading dimensions wider than the matrices (the padding must stay
// untouched).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_isa.h"
#include "core/gemm.h"
#include "k3/model.h"
#include "ops/harness.h"

namespace k3 {
namespace {

std::vector<float> uniform(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

struct Shape {
  int64_t m, n, k;
};

const Shape kShapes[] = {{0, 5, 3},   {4, 0, 3},     {3, 5, 0},     {1, 1, 1},     {1, 7, 1},
                         {1, 1, 9},   {2, 3, 4},     {5, 9, 7},     {6, 16, 8},    {7, 17, 33},
                         {8, 32, 16}, {9, 33, 5},    {13, 15, 31},  {3, 64, 2},    {4, 65, 19},
                         {25, 48, 3}, {33, 100, 1},  {17, 257, 11}, {5, 31, 300},  {49, 40, 64},
                         {2, 8, 513}, {6, 300, 260}, {30, 513, 7},  {97, 129, 257}};

// Element (i, p) of A stored row-major [m, lda] (row layout) or as [k, lda] read transposed.
struct Operand {
  std::vector<float> store;
  GemmA a;
};

Operand make_a(std::mt19937_64& rng, int64_t m, int64_t k, bool transposed) {
  Operand o;
  const int64_t lda = (transposed ? m : k) + 3;
  o.store = uniform(rng, (transposed ? k : m) * lda + 1);
  o.a = transposed ? GemmA{o.store.data(), 1, lda} : GemmA{o.store.data(), lda, 1};
  return o;
}

void check_shape(std::mt19937_64& rng, Shape s, bool transposed, const char* isa) {
  const int64_t ldb = s.n + 2, ldc = s.n + 5;
  Operand A = make_a(rng, s.m, s.k, transposed);
  const std::vector<float> b = uniform(rng, s.k * ldb + 1);
  const std::vector<float> c0 = uniform(rng, s.m * ldc + 1);  // the padding too: must survive
  std::vector<float> got = c0, want = c0;
  gemm_acc(s.m, s.n, s.k, A.a, b.data(), ldb, got.data(), ldc);
  gemm_acc_ref(s.m, s.n, s.k, A.a, b.data(), ldb, want.data(), ldc);
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i * ldc + j);
      if (j >= s.n) {
        ASSERT_EQ(got[at], c0[at]) << isa << " padding written at " << i << "," << j;
        continue;
      }
      // A k-term fp32 chain rounds at most 2k+1 times: |error| <= (2k+1)·u·Σ|terms|.
      double scale = std::fabs(c0[at]);
      for (int64_t p = 0; p < s.k; ++p)
        scale += std::fabs(double(A.a.data[i * A.a.row_stride + p * A.a.col_stride]) *
                           b[static_cast<size_t>(p * ldb + j)]);
      const double tol = double(2 * s.k + 1) * 0x1p-24 * scale + 1e-30;
      ASSERT_NEAR(got[at], want[at], tol) << isa << " " << s.m << "x" << s.n << "x" << s.k
                                          << (transposed ? " At" : " A") << " at " << i << "," << j;
    }
  }
  EXPECT_EQ(got.back(), c0.back()) << isa << " wrote past the last row";
}

// The training shapes of the default-size model (d 256, vocab 8192, 256 tokens): the lm_head
// input gradient (k = vocab), its weight gradient (A = dyᵀ) and a Newton–Schulz product.
test::PerfCase gemm_perf(int64_t m, int64_t n, int64_t k, bool transposed, const char* name) {
  return {"gemm_acc",
          std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " + name,
          2.0 * m * n * k, 4.0 * (m * k + k * n),
          [=](std::mt19937_64& rng) -> std::function<void()> {
            auto a = std::make_shared<std::vector<float>>(uniform(rng, m * k));
            auto b = std::make_shared<std::vector<float>>(uniform(rng, k * n));
            auto c = std::make_shared<std::vector<float>>(uniform(rng, m * n));
            const GemmA A = transposed ? GemmA{a->data(), 1, m} : GemmA{a->data(), k, 1};
            return [=] {  // a is captured to keep A's storage alive
              (void)a;
              gemm_acc(m, n, k, A, b->data(), n, c->data(), n);
            };
          }};
}

const test::RegisterPerf perf({gemm_perf(256, 256, 8192, false, "lm_head dx"),
                               gemm_perf(8192, 256, 256, true, "lm_head dW"),
                               gemm_perf(256, 768, 256, false, "newton-schulz")});

TEST(Gemm, EveryPathMatchesReference) {
  const Isa saved = active_isa();
  std::mt19937_64 rng(2026);
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    EXPECT_STREQ(gemm_isa(), isa_name(isa));
    for (const Shape& s : kShapes) {
      for (bool transposed : {false, true}) check_shape(rng, s, transposed, isa_name(isa));
    }
  }
  set_isa(saved);
}

// Each output is one chain over k in order, so splitting C (over threads, tiles or calls)
// changes no bit: a whole product equals the same product one row of C at a time, on any
// thread count.
TEST(Gemm, ResultDoesNotDependOnSplitOrThreads) {
  const Isa saved = active_isa();
  const int threads = num_threads();
  const int64_t m = 53, n = 300, k = 270;
  std::mt19937_64 rng(7);
  const std::vector<float> a = uniform(rng, m * k), b = uniform(rng, k * n),
                           c0 = uniform(rng, m * n);
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    std::vector<float> whole = c0, rows = c0, two = c0;
    set_num_threads(1);
    gemm_acc(m, n, k, {a.data(), k, 1}, b.data(), n, whole.data(), n);
    for (int64_t i = 0; i < m; ++i)
      gemm_acc(1, n, k, {a.data() + i * k, k, 1}, b.data(), n, rows.data() + i * n, n);
    set_num_threads(2);
    gemm_acc(m, n, k, {a.data(), k, 1}, b.data(), n, two.data(), n);
    for (size_t i = 0; i < whole.size(); ++i) {
      ASSERT_EQ(whole[i], rows[i]) << isa_name(isa) << " at " << i;
      ASSERT_EQ(whole[i], two[i]) << isa_name(isa) << " at " << i;
    }
  }
  set_num_threads(threads);
  set_isa(saved);
}

}  // namespace
}  // namespace k3
