// linear in q8 precision (core/precision.h): MXFP4 weights times int8 activations, on every
// path this CPU has (scalar, AVX2, and AVX-512 with AVX512_VNNI). Checked here:
//   - the quantiser against its definition (q = round(x * 127 / max|x|) per block of 32, the
//     layout of linear_kernels.h);
//   - every path against plain double arithmetic on the quantised activations (the error left
//     is fp32 accumulation: the fp32 linear cases' 1e-6 of Σ|terms|), and the paths against each
//     other bit for bit (they keep one summation order);
//   - the quantisation error itself against its bound (|x - q·d| <= d/2 per element);
//   - degenerate shapes (1 row, K = 32, partial 512-column windows, rows off the 16-row task),
//     E8M0 extremes (0, 1, 254, 255), zero blocks, -0, non-finite activations;
//   - batch invariance, and that only MXFP4 weights take the int8 path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <tuple>

#include "core/cpu_isa.h"
#include "core/precision.h"
#include "ops/harness.h"
#include "ops/linear/linear.h"
#include "ops/linear/linear_kernels.h"
#include "ops/random_weight.h"

namespace k3::test {
namespace {

constexpr double kTol = 1e-6;  // the fp32 linear cases' tolerance

// Runs body(path name) in q8 precision on each supported ISA; restores the state after.
void for_each_q8_path(const std::function<void(const std::string&)>& body) {
  const Isa saved_isa = active_isa();
  const Precision saved = active_precision();
  set_precision(Precision::q8);
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    body(std::string(isa_name(isa)) + "/" + q8_kernel_name());
  }
  set_isa(saved_isa);
  set_precision(saved);
}

// The quantised form of one row, read back from the layout of linear_kernels.h.
struct Quantised {
  std::vector<int> q;     // [cols]
  std::vector<float> dh;  // [cols / 32]
  std::vector<int> corr;  // [cols / 32]
};

Quantised read_back(const uint8_t* row, int64_t cols) {
  Quantised r;
  for (int64_t gb = 0; gb < cols / 32; ++gb) {
    const uint8_t* win = row + (gb / 16) * kQ8WinBytes;
    const int64_t blk = gb % 16, g = blk / 4, b = blk % 4, lane = 4 * b + g;
    for (int64_t i = 0; i < 32; ++i)
      r.q.push_back(static_cast<int8_t>(win[128 * g + (i % 2) * 64 + 16 * b + i / 2]));
    float dh;
    int32_t corr;
    std::memcpy(&dh, win + 576 + 4 * lane, 4);
    std::memcpy(&corr, win + 512 + 4 * lane, 4);
    r.dh.push_back(dh);
    r.corr.push_back(corr);
  }
  return r;
}

// The E2M1 value of nibble n, doubled (an integer).
int twice_e2m1(int n) {
  static const int kMag[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  return (n & 8) ? -kMag[n & 7] : kMag[n & 7];
}

struct Ref {
  std::vector<double> y;  // [T, rows]
  double scale = 0;       // max over outputs of Σ|terms|
};

// Plain double arithmetic on the quantised activations: y = Σ_blocks s_b · Σ_i q_i · 2e2m1_i,
// s_b = fp32(2^(e-127) · d_b/2) as the kernels form it. Never optimised.
Ref reference_q8(const std::vector<float>& x, int64_t T, const Mat& w) {
  const int64_t cols = w.cols, nb = cols / 32, rb = q8_row_bytes(cols);
  std::vector<uint8_t> xq(T * rb);
  q8_quantize(x.data(), T, cols, xq.data());
  const auto* packed = static_cast<const uint8_t*>(w.data);
  Ref ref;
  ref.y.assign(T * w.rows, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const Quantised qt = read_back(xq.data() + t * rb, cols);
    for (int64_t r = 0; r < w.rows; ++r) {
      double acc = 0, mag = 0;
      for (int64_t b = 0; b < nb; ++b) {
        int64_t isum = 0;
        for (int64_t i = 0; i < 32; ++i) {
          const uint8_t p = packed[r * cols / 2 + (32 * b + i) / 2];
          isum += int64_t{qt.q[32 * b + i]} * twice_e2m1(i % 2 ? p >> 4 : p & 15);
        }
        const float ws = std::ldexp(1.0f, int{w.scales[r * nb + b]} - 127);
        const double term = double(ws * qt.dh[b]) * double(isum);
        acc += term;
        mag += std::fabs(term);
      }
      ref.y[t * w.rows + r] = acc;
      ref.scale = std::max(ref.scale, mag);
    }
  }
  return ref;
}

// Perf cases (bench/ops_perf.sh) at the slice's expert shapes: gate / up 3072 x 3584, down
// 3584 x 3072; one decode token, a 4-token step, a prefill chunk. Each run switches the process
// to q8 precision and back (two relaxed atomic stores).
PerfCase q8_perf(int64_t T, int64_t rows, int64_t cols, const char* name) {
  return {"linear", cat_shape(T, rows, cols) + " q8 " + name, 2.0 * T * rows * cols,
          rows * cols * (0.5 + 1.0 / 32), [=](std::mt19937_64& rng) -> std::function<void()> {
            auto w = std::make_shared<Weight>(random_weight(rng, rows, cols, MatFormat::mxfp4));
            auto x = std::make_shared<std::vector<float>>(randn(rng, T * cols));
            auto y = std::make_shared<std::vector<float>>(T * rows);
            return [=] {
              const Precision saved = active_precision();
              set_precision(Precision::q8);
              linear(x->data(), T, w->mat, y->data());
              set_precision(saved);
            };
          }};
}

static RegisterPerf perf({q8_perf(1, 3072, 3584, "mxfp4 expert_w1"),
                          q8_perf(1, 3584, 3072, "mxfp4 expert_w2"),
                          q8_perf(4, 3072, 3584, "mxfp4 expert_w1"),
                          q8_perf(32, 3072, 3584, "mxfp4 expert_w1")});

TEST(LinearQ8, QuantiserFollowsItsDefinition) {
  std::mt19937_64 rng(1);
  for (int64_t cols : {32, 64, 480, 512, 544, 1056}) {
    std::vector<float> x = randn(rng, cols, 3.0);
    for (int64_t i = 0; i < 32; ++i) x[i] = 0.0f;  // a zero block
    if (cols >= 64) x[40] = -0.0f;
    std::vector<uint8_t> xq(q8_row_bytes(cols), 0xAB);
    q8_quantize(x.data(), 1, cols, xq.data());
    const Quantised q = read_back(xq.data(), cols);
    for (int64_t b = 0; b < cols / 32; ++b) {
      float amax = 0;
      int sum = 0;
      for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
      EXPECT_EQ(q.dh[b], amax / 127.0f * 0.5f) << "block " << b;
      for (int64_t i = 0; i < 32; ++i) {
        const int qi = q.q[32 * b + i];
        sum += qi;
        ASSERT_LE(std::abs(qi), 127);
        const double want = amax > 0 ? std::nearbyint(double(x[32 * b + i]) * 127.0 / amax) : 0;
        EXPECT_EQ(qi, int(want)) << "cols " << cols << " element " << 32 * b + i;
      }
      EXPECT_EQ(q.corr[b], 12 * sum);
    }
    // The padding of the last window is zero (its blocks add nothing).
    const int64_t used = (cols / 32) % 16;
    if (used != 0) {
      const uint8_t* win = xq.data() + (cols / 512) * kQ8WinBytes;
      for (int64_t blk = used; blk < 16; ++blk) {
        const int64_t g = blk / 4, b = blk % 4, lane = 4 * b + g;
        for (int64_t i = 0; i < 16; ++i) {
          ASSERT_EQ(win[128 * g + 16 * b + i], 0);
          ASSERT_EQ(win[128 * g + 64 + 16 * b + i], 0);
        }
        for (int64_t k = 0; k < 4; ++k) {
          ASSERT_EQ(win[512 + 4 * lane + k], 0);
          ASSERT_EQ(win[576 + 4 * lane + k], 0);
        }
      }
    }
  }
}

// T = 1..4 (one token tile), past it and past the 16-token chunk; rows of one, off the 16-row
// task; columns of one block, partial windows, several windows.
std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes() {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> s;  // T, rows, cols
  for (int64_t T : {1, 2, 3, 4, 5, 7, 16, 17, 33})
    for (auto [r, c] : {std::pair{1, 32},
                        {7, 64},
                        {16, 96},
                        {33, 160},
                        {17, 512},
                        {9, 544},
                        {3, 1056},
                        {18, 2048}})
      s.emplace_back(T, r, c);
  s.emplace_back(2, 5, 7168);
  return s;
}

TEST(LinearQ8, MatchesDoubleReferenceOnQuantisedActivationsOnEveryPath) {
  for_each_q8_path([&](const std::string& path) {
    for (auto [T, rows, cols] : shapes()) {
      std::mt19937_64 rng(T * 1000003 + rows * 1009 + cols);
      Weight w = random_weight(rng, rows, cols, MatFormat::mxfp4);
      const std::vector<float> x = randn(rng, T * cols);
      std::vector<float> got(T * rows);
      linear(x.data(), T, w.mat, got.data());
      const Ref ref = reference_q8(x, T, w.mat);
      EXPECT_LE(rel_max_error(got, ref.y, ref.scale), kTol)
          << path << " " << cat_shape(T, rows, cols);
    }
  });
}

// The paths keep one summation order (linear_kernels.h), so they agree bit for bit.
TEST(LinearQ8, PathsAgreeBitForBit) {
  for (const auto& s : shapes()) {
    // plain copies: clang 14 cannot capture structured bindings in the lambda below
    const int64_t T = std::get<0>(s), rows = std::get<1>(s), cols = std::get<2>(s);
    std::mt19937_64 rng(7 + T * 31 + rows * 7 + cols);
    Weight w = random_weight(rng, rows, cols, MatFormat::mxfp4);
    const std::vector<float> x = randn(rng, T * cols);
    std::vector<float> first;
    std::string first_path;
    for_each_q8_path([&](const std::string& path) {
      std::vector<float> got(T * rows);
      linear(x.data(), T, w.mat, got.data());
      if (first.empty()) {
        first = got;
        first_path = path;
        return;
      }
      for (int64_t i = 0; i < T * rows; ++i)
        ASSERT_EQ(std::memcmp(&got[i], &first[i], 4), 0)
            << path << " vs " << first_path << " " << cat_shape(T, rows, cols) << " i=" << i;
    });
  }
}

// The int8 activations move each output by at most Σ_i |w_i| · d_b / 2 (d_b = max|x| / 127 of
// the element's block), plus fp32 accumulation: against the exact fp32 reference of linear.
TEST(LinearQ8, QuantisationErrorWithinItsBound) {
  std::mt19937_64 rng(3);
  const int64_t T = 5, rows = 24, cols = 1056;
  Weight w = random_weight(rng, rows, cols, MatFormat::mxfp4);
  const std::vector<float> x = randn(rng, T * cols);
  std::vector<float> exact(T * rows), row(cols);
  linear_ref(x.data(), T, w.mat, exact.data());
  for_each_q8_path([&](const std::string& path) {
    std::vector<float> got(T * rows);
    linear(x.data(), T, w.mat, got.data());
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      mat_row(w.mat, r, row.data());
      for (int64_t t = 0; t < T; ++t) {
        double bound = 0, mag = 0;
        for (int64_t b = 0; b < cols / 32; ++b) {
          float amax = 0;
          for (int64_t i = 0; i < 32; ++i)
            amax = std::max(amax, std::fabs(x[t * cols + 32 * b + i]));
          for (int64_t i = 0; i < 32; ++i) {
            bound += std::fabs(row[32 * b + i]) * amax / 127.0 / 2;
            mag += std::fabs(row[32 * b + i] * x[t * cols + 32 * b + i]);
          }
        }
        const double err = std::fabs(double(got[t * rows + r]) - exact[t * rows + r]);
        EXPECT_LE(err, bound + 1e-6 * mag) << path << " t=" << t << " r=" << r;
        worst = std::max(worst, err / bound);
      }
    }
    // ... and the bound is not vacuous: the error is a sizeable part of it somewhere.
    EXPECT_GT(worst, 0.02) << path;
  });
}

// E8M0 extremes (0 = 2^-127, 1, 254 = 2^127) beside ordinary scales, tiny activations so the
// 2^127 blocks stay finite, zero blocks, and the -0 nibble (8) everywhere in some blocks.
TEST(LinearQ8, ExtremeScalesAndZeros) {
  for_each_q8_path([&](const std::string& path) {
    for (auto [T, rows, cols] : {std::tuple{1, 3, 32}, {3, 17, 544}, {5, 4, 1024}}) {
      std::mt19937_64 rng(11 + cols);
      Weight w = random_weight(rng, rows, cols, MatFormat::mxfp4);
      const uint8_t extremes[] = {0, 1, 254, 127, 126};
      for (size_t i = 0; i < w.scales.size(); ++i) w.scales[i] = extremes[rng() % 5];
      for (int64_t b = 0; b < rows * cols / 32; b += 3)
        std::memset(&w.bytes[b * 16], 0x88, 16);  // -0, -0
      std::vector<float> x = randn(rng, T * cols, 1e-20);
      for (int64_t i = 0; i < 32; ++i) x[i] = (i % 2) ? 0.0f : -0.0f;  // a zero block
      std::vector<float> got(T * rows);
      linear(x.data(), T, w.mat, got.data());
      const Ref ref = reference_q8(x, T, w.mat);
      for (float v : got) ASSERT_TRUE(std::isfinite(v)) << path;
      EXPECT_LE(rel_max_error(got, ref.y, ref.scale), kTol)
          << path << " " << cat_shape(T, rows, cols);
    }
  });
}

// E8M0 255 (NaN in the OCP spec; the fp32 path decodes it as +inf) makes its rows non-finite,
// as in fp32; NaN / infinite activations make their token's outputs NaN; the rest stays finite.
TEST(LinearQ8, NonFinitePropagates) {
  for_each_q8_path([&](const std::string& path) {
    for (int64_t T : {1, 3, 12}) {
      std::mt19937_64 rng(23 + T);
      Weight w = random_weight(rng, 8, 96, MatFormat::mxfp4);
      w.scales[5 * 3 + 1] = 255;  // row 5, block 1
      std::vector<float> x = randn(rng, T * 96), y(T * 8);
      x[(T - 1) * 96 + 5] = std::numeric_limits<float>::quiet_NaN();
      if (T > 2) x[1 * 96 + 70] = std::numeric_limits<float>::infinity();
      linear(x.data(), T, w.mat, y.data());
      for (int64_t t = 0; t < T; ++t) {
        const bool bad_token = t == T - 1 || (T > 2 && t == 1);
        for (int64_t r = 0; r < 8; ++r) {
          if (bad_token) {
            EXPECT_TRUE(std::isnan(y[t * 8 + r])) << path << " T=" << T << " t=" << t;
          } else {
            EXPECT_EQ(std::isfinite(y[t * 8 + r]), r != 5) << path << " T=" << T << " r=" << r;
          }
        }
      }
    }
  });
}

// A token's outputs are bit-identical alone or in any batch, at any position.
TEST(LinearQ8, EveryPathIsBatchInvariant) {
  for_each_q8_path([&](const std::string& path) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 32}, {5, 96}, {33, 544}, {16, 1024}}) {
      std::mt19937_64 rng(17 + rows * cols);
      Weight w = random_weight(rng, rows, cols, MatFormat::mxfp4);
      const int64_t most = 20;
      const std::vector<float> x = randn(rng, most * cols);
      std::vector<float> one(most * rows);
      for (int64_t t = 0; t < most; ++t) linear(x.data() + t * cols, 1, w.mat, &one[t * rows]);
      for (int64_t T = 2; T <= most; ++T) {
        std::vector<float> all(T * rows);
        linear(x.data(), T, w.mat, all.data());
        for (int64_t i = 0; i < T * rows; ++i)
          ASSERT_EQ(all[i], one[i]) << path << " rows " << rows << " T=" << T << " i=" << i;
      }
    }
  });
}

// q8 takes only MXFP4 weights: BF16 ones get bf16 precision's bits, F32 ones and the router
// (keep_fp32) fp32's; and MXFP4 results really differ from bf16's (the int8 rounding).
TEST(LinearQ8, OnlyMxfp4TakesInt8) {
  std::mt19937_64 rng(9);
  const int64_t T = 3, rows = 19, cols = 256;
  const std::vector<float> x = randn(rng, T * cols);
  for_each_q8_path([&](const std::string& path) {
    for (MatFormat f : {MatFormat::bf16, MatFormat::f32, MatFormat::mxfp4}) {
      for (bool keep : {false, true}) {
        Weight w = random_weight(rng, rows, cols, f);
        w.mat.keep_fp32 = keep;
        std::vector<float> got(T * rows), bf16(T * rows), fp32(T * rows);
        linear(x.data(), T, w.mat, got.data());
        set_precision(Precision::bf16);
        linear(x.data(), T, w.mat, bf16.data());
        set_precision(Precision::fp32);
        linear(x.data(), T, w.mat, fp32.data());
        set_precision(Precision::q8);
        EXPECT_EQ(linear_takes_q8(w.mat), f == MatFormat::mxfp4 && !keep) << path;
        if (f == MatFormat::mxfp4 && !keep) {
          EXPECT_NE(got, bf16) << path;
        } else {
          EXPECT_EQ(got, (f == MatFormat::f32 || keep) ? fp32 : bf16) << path << " keep " << keep;
        }
      }
    }
  });
}

}  // namespace
}  // namespace k3::test
