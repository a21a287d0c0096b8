// linear in bf16 precision (core/precision.h) on every path this CPU has: each CPU path, and on
// AVX-512 CPUs with AVX512_BF16 the vdpbf16ps kernels and the fallback (fp32 FMA of the bf16
// products) both. The reference is plain double arithmetic on the bf16-rounded activations and
// the exact weights, so the only error left is fp32 accumulation: held to the fp32 op cases'
// measure and tolerance (1e-6 of Σ|x·w|). The new kernels are also tested one by one (rounding,
// MXFP4 to bf16, the tiles at row offsets).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <string>

#include "backend/cuda/cuda.h"
#include "core/bf16.h"
#include "core/cpu_isa.h"
#include "core/error.h"
#include "core/precision.h"
#include "ops/harness.h"
#include "ops/linear/linear.h"
#include "ops/linear/linear_kernels.h"
#include "ops/linear_checks.h"
#include "ops/mxfp4/mxfp4.h"
#include "ops/random_weight.h"

namespace k3::test {
namespace {

constexpr double kTol = 1e-6;  // the fp32 linear cases' tolerance

// Runs body(name) in bf16 precision on every path: each supported ISA, and where vdpbf16ps is
// available, once with it and once with the fallback, and where AMX is, once on the tiles too.
// Restores the state after.
void for_each_bf16_path(const std::function<void(const std::string&)>& body) {
  const Isa saved_isa = active_isa();
  const Precision saved = active_precision();
  set_precision(Precision::bf16);
  enum Kind { fallback, vdpbf16ps, tiles };
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    for (Kind kind : {fallback, vdpbf16ps, tiles}) {
      if (kind == vdpbf16ps && !bf16_dot_available()) continue;
      if (kind == tiles && !bf16_amx_available()) continue;
      set_bf16_dot_allowed(kind != fallback);
      set_bf16_amx_allowed(kind == tiles);
      body(std::string(isa_name(isa)) + (kind == tiles       ? "+amx"
                                         : kind == vdpbf16ps ? "+vdpbf16ps"
                                                             : "+fallback"));
    }
  }
  set_bf16_dot_allowed(true);
  set_amx_use(amx_use_from_env());
  set_isa(saved_isa);
  set_precision(saved);
}

// Plain double linear on the bf16-rounded x.
Ref reference_bf16(const std::vector<float>& x, int64_t T, const Mat& w) {
  return reference_linear(x, T, w, /*round_x=*/true);
}

// T = 1, 2: decode; 3..7: tiles with tails (MXFP4 straight from storage); 8+: MXFP4 row blocks
// decoded to bf16; rows off the tile heights and past one 16-row task; columns of one chunk up
// to 1024, and off the 32-column chunk (the fallback takes those) including 1.
TEST(LinearBf16, MatchesDoubleReferenceOnRoundedActivationsOnEveryPath) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes;  // T, rows, cols
  for (int64_t T : {1, 2, 3, 4, 5, 7, 8, 9, 17, 64})
    for (auto [r, c] : {std::pair{1, 32}, {7, 64}, {64, 96}, {33, 160}, {17, 256}, {9, 1024}})
      shapes.emplace_back(T, r, c);
  for (auto s : {std::tuple{5, 13, 40},
                 {9, 6, 100},
                 {4, 4, 16},
                 {8, 17, 7},
                 {1, 1, 1},
                 {2, 3, 1},
                 {1, 1, 16},
                 {3, 2, 48},
                 {17, 1, 8},
                 {20, 50, 24}})
    shapes.push_back(s);
  for_each_bf16_path([&](const std::string& path) {
    for (MatFormat f : {MatFormat::bf16, MatFormat::mxfp4}) {
      for (auto [T, rows, cols] : shapes) {
        if (f == MatFormat::mxfp4 && cols % 32 != 0) continue;
        std::mt19937_64 rng(T * 1000003 + rows * 1009 + cols);
        Weight w = random_weight(rng, rows, cols, f);
        const std::vector<float> x = randn(rng, T * cols);
        std::vector<float> got(T * rows);
        linear(x.data(), T, w.mat, got.data());
        const Ref ref = reference_bf16(x, T, w.mat);
        EXPECT_LE(rel_max_error(got, ref.y, ref.scale), kTol)
            << path << " " << format_name(f) << " " << cat_shape(T, rows, cols);
      }
    }
  });
}

// The mode really rounds: on a shape where rounding x moves the outputs by far more than the
// tolerance, the result follows the rounded reference, not the fp32 one.
TEST(LinearBf16, RoundsTheActivations) {
  std::mt19937_64 rng(5);
  const int64_t T = 9, rows = 16, cols = 256;
  for (MatFormat f : {MatFormat::bf16, MatFormat::mxfp4}) {
    Weight w = random_weight(rng, rows, cols, f);
    const std::vector<float> x = randn(rng, T * cols);
    std::vector<float> want_fp32(T * rows);
    linear_ref(x.data(), T, w.mat, want_fp32.data());
    const Ref ref = reference_bf16(x, T, w.mat);
    ASSERT_GT(rel_max_error(want_fp32, ref.y, ref.scale), 100 * kTol) << "shape too easy";
    for_each_bf16_path([&](const std::string& path) {
      std::vector<float> got(T * rows);
      linear(x.data(), T, w.mat, got.data());
      EXPECT_LE(rel_max_error(got, ref.y, ref.scale), kTol) << path;
    });
  }
}

// F32 weights (training's master weights) keep fp32 arithmetic in bf16 precision.
TEST(LinearBf16, F32WeightsAreNotRounded) {
  std::mt19937_64 rng(6);
  Weight w = random_weight(rng, 19, 96, MatFormat::f32);
  const std::vector<float> x = randn(rng, 5 * 96);
  std::vector<float> fp32(5 * 19), got(5 * 19);
  for_each_bf16_path([&](const std::string& path) {
    linear(x.data(), 5, w.mat, got.data());
    set_precision(Precision::fp32);  // the same path in fp32
    linear(x.data(), 5, w.mat, fp32.data());
    set_precision(Precision::bf16);
    EXPECT_EQ(got, fp32) << path;
  });
}

// As in fp32: a token's outputs are bit-identical alone (decode), in pairs or among many (tiles,
// MXFP4 decoded row blocks), whatever its position, on every bf16 path.
TEST(LinearBf16, EveryPathIsBatchInvariant) {
  for_each_bf16_path([&](const std::string& path) {
    for (MatFormat f : {MatFormat::bf16, MatFormat::mxfp4}) {
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 32},
                                {5, 96},
                                {13, 128},
                                {33, 256},
                                {19, 40},
                                {16, 512},
                                {11, 1024},    // a lone token row by row
                                {5, 2080}}) {  // long rows: 8-row tiles
        if (f == MatFormat::mxfp4 && cols % 32 != 0) continue;
        std::mt19937_64 rng(17 + rows * cols);
        Weight w = random_weight(rng, rows, cols, f);
        const int64_t most = 20;
        const std::vector<float> x = randn(rng, most * cols);
        std::vector<float> one(most * rows);
        for (int64_t t = 0; t < most; ++t) linear(x.data() + t * cols, 1, w.mat, &one[t * rows]);
        for (int64_t T = 2; T <= most; ++T) {
          std::vector<float> all(T * rows);
          linear(x.data(), T, w.mat, all.data());
          for (int64_t i = 0; i < T * rows; ++i)
            ASSERT_EQ(all[i], one[i])
                << path << " " << format_name(f) << " rows " << rows << " T=" << T << " i=" << i;
        }
      }
    }
  });
}

// A NaN or infinity in a row of x reaches that row's outputs on every path (the rounding keeps
// NaN a NaN and infinity infinite); the other rows stay finite.
TEST(LinearBf16, NonFiniteActivationsPropagate) {
  for_each_bf16_path([&](const std::string& path) {
    for (MatFormat f : {MatFormat::bf16, MatFormat::mxfp4}) {
      for (int64_t T : {1, 3, 12}) {
        std::mt19937_64 rng(23 + T);
        Weight w = random_weight(rng, 8, 64, f);
        std::vector<float> x = randn(rng, T * 64), y(T * 8);
        x[(T - 1) * 64 + 5] = std::numeric_limits<float>::quiet_NaN();
        linear(x.data(), T, w.mat, y.data());
        for (int64_t r = 0; r < 8; ++r) {
          EXPECT_TRUE(std::isnan(y[(T - 1) * 8 + r])) << path << " T=" << T << " r=" << r;
          if (T > 1) {
            EXPECT_TRUE(std::isfinite(y[r])) << path;
          }
        }
      }
    }
  });
}

// The vdpbf16ps table's kernels on their own (AVX-512 CPUs with AVX512_BF16 only).
class Bf16Kernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!(isa_supported(Isa::avx512) && cpu_features().avx512_bf16))
      GTEST_SKIP() << "this CPU has no AVX512_BF16";
  }
  const LinearBf16Kernels& k = avx512bf16::kLinearBf16Kernels;
};

// Rounding: bit-identical to f32_to_bf16 at every length 0..70 (the masked tail) on random
// values, ties, the largest finite values (which round to infinity), subnormals, zeros of
// both signs, infinities and NaNs (quietened, sign kept).
TEST_F(Bf16Kernels, RoundingMatchesScalarBitForBit) {
  std::mt19937_64 rng(8);
  std::vector<float> x = randn(rng, 70, 3.0);
  const uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f7fffffu, 0xff7fffffu,
                               0x00000001u, 0x807fffffu, 0x00008000u, 0x00000000u, 0x80000000u,
                               0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xff812345u,
                               0x7f7f8000u, 0x3f807fffu, 0x477fe000u};
  for (size_t i = 0; i < std::size(specials); ++i) std::memcpy(&x[3 * i + 1], &specials[i], 4);
  for (int64_t n = 0; n <= 70; ++n) {
    std::vector<uint16_t> got(n + 1, 0xabcd);
    k.round_bf16(x.data(), n, got.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], f32_to_bf16(x[i])) << "n=" << n << " i=" << i;
    EXPECT_EQ(got[n], 0xabcd) << "wrote past the end, n=" << n;
  }
}

// MXFP4 to bf16: every code at every E8M0 exponent 0..254, and random rows, widened back equal
// the element reference exactly.
TEST_F(Bf16Kernels, Mxfp4DecodesToBf16Exactly) {
  std::vector<uint8_t> packed(16), scale(1);
  for (int i = 0; i < 16; ++i) packed[i] = static_cast<uint8_t>((i & 15) | ((15 - i) << 4));
  std::vector<uint16_t> out(32);
  for (int s = 0; s < 255; ++s) {
    scale[0] = static_cast<uint8_t>(s);
    k.mxfp4_decode(packed.data(), scale.data(), 32, out.data());
    for (int i = 0; i < 32; ++i)
      ASSERT_EQ(bf16_to_f32(out[i]), mxfp4_value_ref(packed.data(), scale.data(), i))
          << "scale " << s << " element " << i;
  }
  std::mt19937_64 rng(9);
  for (int64_t cols : {32, 64, 96, 1024}) {
    Weight w = random_weight(rng, 3, cols, MatFormat::mxfp4);
    std::vector<uint16_t> row(cols);
    for (int64_t r = 0; r < 3; ++r) {
      k.mxfp4_decode(&w.bytes[r * cols / 2], &w.scales[r * cols / 32], cols, row.data());
      for (int64_t i = 0; i < cols; ++i)
        ASSERT_EQ(bf16_to_f32(row[i]),
                  mxfp4_value_ref(&w.bytes[r * cols / 2], &w.scales[r * cols / 32], i));
    }
  }
}

// The tiles at a row offset into a larger output (ldy > rows): rows [r0, r0 + nr) written,
// every other output untouched; T 1..13 covers every tile height and tail.
TEST_F(Bf16Kernels, TilesAtRowOffsetsWriteOnlyTheirRows) {
  const int64_t rows = 40, cols = 128, r0 = 7, nr = 19, ldy = rows + 3;
  for (MatFormat f : {MatFormat::bf16, MatFormat::mxfp4}) {
    for (int64_t T = 1; T <= 13; ++T) {
      std::mt19937_64 rng(31 + T);
      Weight w = random_weight(rng, rows, cols, f);
      const std::vector<float> x = randn(rng, T * cols);
      std::vector<uint16_t> xb(T * cols);
      k.round_bf16(x.data(), T * cols, xb.data());
      std::vector<float> y(T * ldy, -7.0f);
      if (f == MatFormat::bf16) {
        k.gemv_bf16(xb.data(), T, reinterpret_cast<const uint16_t*>(w.bytes.data()), cols, r0, nr,
                    y.data(), ldy);
      } else {
        k.gemv_mxfp4(xb.data(), T, w.bytes.data(), w.scales.data(), cols, r0, nr, y.data(), ldy);
      }
      const Ref ref = reference_bf16(x, T, w.mat);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < ldy; ++j) {
          if (j < r0 || j >= r0 + nr) {
            ASSERT_EQ(y[t * ldy + j], -7.0f) << format_name(f) << " T=" << T << " j=" << j;
          } else {
            EXPECT_LE(std::fabs(y[t * ldy + j] - ref.y[t * rows + j]), kTol * ref.scale)
                << format_name(f) << " T=" << T << " j=" << j;
          }
        }
      }
    }
  }
}

// The AMX kernels on their own (CPUs with AMX-BF16 the OS grants only): pack_x + gemv_bf16 at
// row offsets into a larger output, over every tile-count of a task (1..4 full tiles and a
// tail of 1..15 rows), token counts around the 16-token tiles, one to many chunks.
TEST(AmxKernels, TilesMatchTheReferenceAndWriteOnlyTheirRows) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "this CPU (or its OS) has no usable AMX-BF16";
  const LinearBf16Kernels& k = avx512bf16::kLinearBf16Kernels;
  for (auto [nr, cols] : kAmxTaskShapes) {
    for (int64_t T : {1, 2, 15, 16, 17, 33}) {
      const int64_t r0 = 5, rows = r0 + nr + 2, ldy = rows + 3;
      std::mt19937_64 rng(41 + T * 131 + nr * 7 + cols);
      Weight w = random_weight(rng, rows, cols, MatFormat::bf16);
      const std::vector<float> x = randn(rng, T * cols);
      std::vector<uint16_t> xb(T * cols), xp(amx::packed_x_size(T, cols), 0xabcd);
      k.round_bf16(x.data(), T * cols, xb.data());
      amx::pack_x(xb.data(), T, cols, xp.data());
      std::vector<float> y(T * ldy, -7.0f);
      amx::gemv_bf16(xp.data(), T, reinterpret_cast<const uint16_t*>(w.bytes.data()), cols, r0, nr,
                     y.data(), ldy);
      const Ref ref = reference_bf16(x, T, w.mat);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < ldy; ++j) {
          if (j < r0 || j >= r0 + nr) {
            ASSERT_EQ(y[t * ldy + j], -7.0f) << "T=" << T << " nr=" << nr << " j=" << j;
          } else {
            ASSERT_LE(std::fabs(y[t * ldy + j] - ref.y[t * rows + j]), kTol * ref.scale)
                << "T=" << T << " nr=" << nr << " cols=" << cols << " t=" << t << " j=" << j;
          }
        }
      }
    }
  }
}

// linear itself on the tiles (matrices large enough for them: kAmxMinCols x kAmxMinRows), BF16
// and MXFP4, against the reference and batch invariant: a token's outputs alone equal its
// outputs among 2..40 tokens, across the 16-token tiles and the 16 / 64-row task sizes.
TEST(AmxKernels, LinearOnTilesMatchesReferenceAndIsBatchInvariant) {
  if (!bf16_amx_available()) GTEST_SKIP() << "this CPU (or its OS) has no usable AMX-BF16";
  const Precision saved = active_precision();
  set_precision(Precision::bf16);
  set_bf16_amx_allowed(true);
  for (MatFormat f : {MatFormat::bf16, MatFormat::mxfp4}) {
    const int64_t rows = 300, cols = 1024, most = 40;
    std::mt19937_64 rng(71 + static_cast<int>(f));
    Weight w = random_weight(rng, rows, cols, f);
    const std::vector<float> x = randn(rng, most * cols);
    std::vector<float> one(most * rows);
    for (int64_t t = 0; t < most; ++t) linear(x.data() + t * cols, 1, w.mat, &one[t * rows]);
    const Ref ref = reference_bf16(x, most, w.mat);
    EXPECT_LE(rel_max_error(one, ref.y, ref.scale), kTol) << format_name(f);
    expect_batch_invariant(x, w.mat, one, {2, 15, 16, 17, 33, 40}, format_name(f));
  }
  set_amx_use(amx_use_from_env());
  set_precision(saved);
}

// The CUDA GEMM path (T > 8) in bf16 precision: x rounded once (RNE), the exact weights
// (MXFP4 widened to bf16), fp32 accumulation on the tensor cores: the same reference and
// tolerance as the CPU paths (the GEMV, T <= 8, keeps fp32 activations: not tested here).
TEST(LinearBf16, CudaGemmMatchesDoubleReferenceOnRoundedActivations) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Precision saved = active_precision();
  set_precision(Precision::bf16);
  cuda_set_host_staging(true);  // host pointers in and out, as the op harness does
  for (MatFormat f : {MatFormat::bf16, MatFormat::mxfp4}) {
    for (auto [T, rows, cols] : {std::tuple<int64_t, int64_t, int64_t>{9, 7, 64},
                                 {17, 64, 96},
                                 {64, 33, 160},
                                 {129, 9, 1024},
                                 {300, 130, 256},
                                 {2048, 64, 512}}) {
      std::mt19937_64 rng(T * 1000003 + rows * 1009 + cols);
      Weight w = random_weight(rng, rows, cols, f);
      const std::vector<float> x = randn(rng, T * cols);
      std::vector<float> got(T * rows);
      kLinearOp.get(Impl::cuda)(x.data(), T, w.mat, got.data());
      const Ref ref = reference_bf16(x, T, w.mat);
      EXPECT_LE(rel_max_error(got, ref.y, ref.scale), kTol)
          << "cuda " << format_name(f) << " " << cat_shape(T, rows, cols);
    }
  }
  cuda_set_host_staging(false);
  set_precision(saved);
}

TEST(Precision, ParsesNamesAndDefaultsToFp32) {
  EXPECT_EQ(parse_precision("fp32"), Precision::fp32);
  EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
  EXPECT_EQ(parse_precision("q8"), Precision::q8);
  EXPECT_THROW(parse_precision("fp16"), Error);
  EXPECT_THROW(parse_precision(""), Error);
  if (std::getenv("K3_PRECISION") == nullptr) {
    EXPECT_EQ(active_precision(), Precision::fp32);
  }
}

}  // namespace
}  // namespace k3::test
