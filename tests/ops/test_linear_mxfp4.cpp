// linear (BF16 / F32 / MXFP4 weights) against the double reference, and MXFP4 decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "core/bf16.h"
#include "core/cpu_isa.h"
#include "ops/harness.h"
#include "ops/linear/linear.h"
#include "ops/mxfp4/mxfp4.h"
#include "ops/random_weight.h"

namespace k3::test {
namespace {

OpCase linear_case(int64_t T, int64_t rows, int64_t cols, MatFormat f) {
  const char* fname[] = {"bf16", "f32", "mxfp4"};
  return {"linear", cat_shape(T, rows, cols) + " " + fname[static_cast<int>(f)], 1e-6,
          [=](std::mt19937_64& rng, Impl impl) {
            Weight w = random_weight(rng, rows, cols, f);
            std::vector<float> x = randn(rng, T * cols), got(T * rows), ref(T * rows);
            kLinearOp.get(impl)(x.data(), T, w.mat, got.data());
            kLinearOp.ref(x.data(), T, w.mat, ref.data());
            // Scale: the largest Σ_i |x_i·w_i| over outputs.
            double scale = 0;
            std::vector<float> row(cols);
            for (int64_t r = 0; r < rows; ++r) {
              mat_row(w.mat, r, row.data());
              for (int64_t t = 0; t < T; ++t) {
                double s = 0;
                for (int64_t i = 0; i < cols; ++i) s += std::fabs(double(x[t * cols + i]) * row[i]);
                scale = std::max(scale, s);
              }
            }
            return Outputs{got, widen(ref), scale};
          }};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  for (MatFormat f : {MatFormat::bf16, MatFormat::f32, MatFormat::mxfp4}) {
    // T = 1, 2: the decode paths (weights read straight from storage); T >= 3: register
    // tiles (BF16 straight from storage; MXFP4 straight from storage up to T = 7 with AVX-512,
    // from decoded row blocks beyond); T = 5, 7: a 4-token tile and a tail of 1 / 3. Rows off
    // the tile heights (1, 7, 9, 17, 33). (Every T up to 20 below, in
    // SmallBatchTilesAreBatchInvariantAtEveryT.)
    for (int64_t T : {1, 2, 3, 4, 5, 7, 17}) {
      for (auto [r, c] : {std::pair{1, 32}, {7, 64}, {64, 96}, {33, 160}, {17, 256}, {9, 1024}}) {
        v.push_back(linear_case(T, r, c, f));
      }
    }
  }
  for (MatFormat f : {MatFormat::bf16, MatFormat::f32}) {  // columns off the SIMD width
    for (auto [T, r, c] : {std::tuple{5, 13, 40},
                           {9, 6, 100},
                           {4, 4, 16},
                           {8, 17, 7},
                           {1, 1, 1},
                           {2, 3, 1},
                           {1, 1, 16},
                           {3, 2, 16},
                           {17, 1, 8},
                           {5, 11, 24}}) {
      v.push_back(linear_case(T, r, c, f));
    }
  }
  // Few rows, long rows: the device's BF16 GEMV splits the columns over 2 … 8 warps (uneven
  // last parts, rows off the row groups, 1 … 8 tokens).
  for (auto [T, r, c] : {std::tuple{1, 37, 2056}, {3, 5, 4104}, {8, 70, 2048}, {2, 130, 520}}) {
    v.push_back(linear_case(T, r, c, MatFormat::bf16));
  }
  // Many tokens, many rows: BF16 tasks of 64 rows (a short last one) when each of up to two
  // threads gets four; 6-token tiles and a 4-, 2- or 1-token tail (T = 64 + 6k + 0, 4, 3, 5).
  for (int64_t T : {66, 68, 69, 71}) v.push_back(linear_case(T, 600, 96, MatFormat::bf16));
  return v;
}

static Register reg(cases());

// Release shapes: KDA q/k/v/g projection (12288 x 7168, BF16) and a routed expert's w1
// (3072 x 3584, MXFP4), for one decode token and a prefill chunk.
PerfCase linear_perf(int64_t T, int64_t rows, int64_t cols, MatFormat f, const char* name) {
  const double wbytes = f == MatFormat::mxfp4 ? rows * cols * (0.5 + 1.0 / 32) : rows * cols * 2.0;
  return {"linear", cat_shape(T, rows, cols) + " " + name, 2.0 * T * rows * cols, wbytes,
          [=](std::mt19937_64& rng) -> std::function<void()> {
            auto w = std::make_shared<Weight>(random_weight(rng, rows, cols, f));
            auto x = std::make_shared<std::vector<float>>(randn(rng, T * cols));
            auto y = std::make_shared<std::vector<float>>(T * rows);
            return [=] { kLinearOp.cpu(x->data(), T, w->mat, y->data()); };
          }};
}

static RegisterPerf perf({linear_perf(1, 12288, 7168, MatFormat::bf16, "bf16 kda_q"),
                          linear_perf(64, 12288, 7168, MatFormat::bf16, "bf16 kda_q"),
                          linear_perf(1, 3072, 3584, MatFormat::mxfp4, "mxfp4 expert_w1"),
                          linear_perf(32, 3072, 3584, MatFormat::mxfp4, "mxfp4 expert_w1")});

// Batch invariance on every CPU path: a token's outputs are bit-identical whether it is alone
// in the call (the decode paths) or one of many (row blocks and tiles), whatever its position.
TEST(Linear, EveryPathIsBatchInvariant) {
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    for (MatFormat f : {MatFormat::bf16, MatFormat::f32, MatFormat::mxfp4}) {
      for (auto [rows, cols, T] : {std::tuple<int64_t, int64_t, int64_t>{19, 64, 9},
                                   {8, 96, 9},
                                   {5, 40, 9},
                                   {1, 32, 3},
                                   {3, 16, 5},
                                   {33, 256, 17},
                                   {7, 160, 4},
                                   {2, 8, 3},
                                   {16, 512, 6},
                                   {9, 1056, 5},      // MXFP4: scales widened 16 groups at a time
                                   {5, 2080, 3},      // BF16 lone token: long rows
                                   {600, 64, 71}}) {  // BF16: 64-row tasks, 6-token tiles
        if (f == MatFormat::mxfp4 && cols % 32 != 0) continue;
        std::mt19937_64 rng(3 + rows + cols);
        Weight w = random_weight(rng, rows, cols, f);
        std::vector<float> x = randn(rng, T * cols), all(T * rows), one(rows), two(2 * rows);
        kLinearOp.cpu(x.data(), T, w.mat, all.data());
        for (int64_t t = 0; t < T; ++t) {
          kLinearOp.cpu(x.data() + t * cols, 1, w.mat, one.data());
          for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(one[r], all[t * rows + r]) << isa_name(isa) << " T=1 t=" << t << " r=" << r;
        }
        const int64_t t2 = T >= 5 ? 3 : T - 2;  // tokens t2, t2+1 on the T = 2 decode path
        kLinearOp.cpu(x.data() + t2 * cols, 2, w.mat, two.data());
        for (int64_t r = 0; r < 2 * rows; ++r)
          ASSERT_EQ(two[r], all[t2 * rows + r]) << isa_name(isa) << " T=2 r=" << r;
      }
    }
  }
  set_isa(saved);
}

// The small-batch tiles (MXFP4 direct up to T = 7 with AVX-512, every 1-3 token tail of the
// 4-token tiles) at every T from 1 to 20, on every path: against the double reference with the
// op cases' error measure and tolerance (fresh random data per T), and each token's outputs
// bit-identical to it alone. Rows 1, 3, 4, 5, 13, 33: full and partial 4-row tiles.
TEST(Linear, SmallBatchTilesAreBatchInvariantAtEveryT) {
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    for (MatFormat f : {MatFormat::mxfp4, MatFormat::bf16, MatFormat::f32}) {
      for (auto [rows, cols] :
           {std::pair<int64_t, int64_t>{1, 32}, {3, 128}, {4, 64}, {5, 96}, {13, 128}, {33, 256}}) {
        std::mt19937_64 rng(11 + rows * cols + static_cast<int>(f));
        for (int64_t T = 1; T <= 20; ++T) {
          const OpCase c = linear_case(T, rows, cols, f);
          const Outputs out = c.run(rng, Impl::cpu);
          EXPECT_LE(rel_max_error(out.got, out.want, out.scale), c.tol)
              << isa_name(isa) << " " << c.shape;
        }
        Weight w = random_weight(rng, rows, cols, f);
        const std::vector<float> x = randn(rng, 20 * cols);
        std::vector<float> one(20 * rows);
        for (int64_t t = 0; t < 20; ++t)
          kLinearOp.cpu(x.data() + t * cols, 1, w.mat, &one[t * rows]);
        for (int64_t T = 1; T <= 20; ++T) {
          std::vector<float> all(T * rows);
          kLinearOp.cpu(x.data(), T, w.mat, all.data());
          for (int64_t i = 0; i < T * rows; ++i)
            ASSERT_EQ(all[i], one[i]) << isa_name(isa) << " T=" << T << " i=" << i;
        }
      }
    }
  }
  set_isa(saved);
}

TEST(Mxfp4, DecodeRowMatchesElementReference) {
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    std::mt19937_64 rng(11);
    Weight w = random_weight(rng, 16, 256, MatFormat::mxfp4);
    std::vector<float> row(256);
    for (int64_t r = 0; r < 16; ++r) {
      mat_row(w.mat, r, row.data());
      for (int64_t i = 0; i < 256; ++i)
        ASSERT_EQ(row[i], mxfp4_value_ref(&w.bytes[r * 128], &w.scales[r * 8], i))
            << isa_name(isa) << " " << r << " " << i;
    }
  }
  set_isa(saved);
}

TEST(Mxfp4, SpecVectorFromRealCheckpoint) {
  // spec §11.3: layer 1 expert 0 w1 row 0, scale byte 121 (2^-6), first 8 packed bytes.
  const uint8_t packed[8] = {0x16, 0xB9, 0xCE, 0x23, 0x85, 0xAB, 0x9B, 0xA2};
  const uint8_t scale[1] = {121};
  const float want[16] = {0.0625,     0.0078125,  -0.0078125, -0.0234375, -0.0625,    -0.03125,
                          0.0234375,  0.015625,   0.046875,   -0.0,       -0.0234375, -0.015625,
                          -0.0234375, -0.0078125, 0.015625,   -0.015625};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(mxfp4_value_ref(packed, scale, i), want[i]) << i;
}

TEST(Mxfp4, EveryScaleAndCodeDecodesToTheFormula) {
  // All finite E8M0 exponents x all 16 codes, against W = (-1)^sign · LUT[mag] · 2^(s-127)
  // written out independently here.
  const float lut[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  std::vector<uint8_t> packed(8), scale(1);
  for (int i = 0; i < 8; ++i) packed[i] = static_cast<uint8_t>((2 * i) | ((2 * i + 1) << 4));
  std::vector<float> row(32);
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    for (int s = 0; s < 255; ++s) {  // 255 is NaN in the OCP MX spec
      scale[0] = static_cast<uint8_t>(s);
      packed.resize(16, 0);
      mxfp4_decode_row(packed.data(), scale.data(), 32, row.data());
      for (int i = 0; i < 16; ++i) {
        const float want = (i & 8 ? -1.0f : 1.0f) * lut[i & 7] * std::ldexp(1.0f, s - 127);
        EXPECT_EQ(row[i], want) << isa_name(isa) << " scale " << s << " code " << i;
        EXPECT_EQ(mxfp4_value_ref(packed.data(), scale.data(), i), want) << "scale " << s;
      }
    }
  }
  set_isa(saved);
}

// Every E8M0 scale, 0 (the subnormal 2^-127) and 255 (infinity) included, read by the direct
// MXFP4 GEMV (T = 1, 2) as by the decoded rows of a larger batch: the same bits (NaN where the
// scale is infinite and a code is zero). Row r has scale r in both its groups, so that no
// larger scale hides it in the sum.
TEST(Linear, DirectMxfp4TakesEveryScaleAsTheDecodedRows) {
  constexpr int64_t kRows = 256, kCols = 64, kT = 9;
  std::mt19937_64 rng(5);
  Weight w = random_weight(rng, kRows, kCols, MatFormat::mxfp4);
  std::vector<uint8_t> scales(kRows * kCols / 32);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(i / 2);
  // The last row (scale 255) all zero codes: 0 times infinity, NaN on every path.
  std::fill_n(w.bytes.end() - kCols / 2, kCols / 2, uint8_t{0});
  Mat m = w.mat;
  m.scales = scales.data();
  const std::vector<float> x = randn(rng, kT * kCols);
  auto same = [](float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    std::vector<float> all(kT * kRows), one(kRows), two(2 * kRows);
    kLinearOp.cpu(x.data(), kT, m, all.data());
    for (int64_t t = 0; t < kT; ++t) {
      kLinearOp.cpu(x.data() + t * kCols, 1, m, one.data());
      for (int64_t r = 0; r < kRows; ++r)
        EXPECT_TRUE(same(one[r], all[t * kRows + r])) << isa_name(isa) << " t=" << t << " r=" << r;
    }
    kLinearOp.cpu(x.data(), 2, m, two.data());
    for (int64_t i = 0; i < 2 * kRows; ++i)
      EXPECT_TRUE(same(two[i], all[i])) << isa_name(isa) << " T=2 i=" << i;
  }
  set_isa(saved);
}

TEST(Mxfp4, ReencodeWithStoredScalesIsIdentity) {
  // spec §11.4 item 5: decode, re-encode with the stored scales fixed, compare bytes.
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> byte(0, 255), exp(100, 140);
  std::vector<uint8_t> packed(64 * 48), scales(64 * 3), again(64 * 48);
  for (auto& b : packed) b = static_cast<uint8_t>(byte(rng));
  for (auto& s : scales) s = static_cast<uint8_t>(exp(rng));
  std::vector<float> row(96);
  for (int r = 0; r < 64; ++r) {
    mxfp4_decode_row(&packed[r * 48], &scales[r * 3], 96, row.data());
    mxfp4_encode_row(row.data(), &scales[r * 3], 96, &again[r * 48]);
  }
  // -0 (code 8) and +0 (code 0) decode to values that compare equal but keep their sign bit.
  EXPECT_EQ(packed, again);
}

}  // namespace
}  // namespace k3::test
