// fp32 precision on AMX tiles (K3_AMX=1 on CPUs with AMX-BF16): the activations as three bf16
// parts, the weights as A tiles packed into contiguous kilobytes. Each piece on its own (the
// split, the packed tiles against the strided ones), then linear itself: against plain double
// arithmetic on the unrounded activations within the fp32 linear cases' tolerance (1e-6 of
// Σ|x·w|), and batch invariant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/bf16.h"
#include "core/cpu_isa.h"
#include "core/precision.h"
#include "ops/harness.h"
#include "ops/linear/linear.h"
#include "ops/linear/linear_kernels.h"
#include "ops/linear_checks.h"
#include "ops/random_weight.h"

namespace k3::test {
namespace {

constexpr double kTol = 1e-6;  // the fp32 linear cases' tolerance

// hi + mid + lo gives x back to within 2^-26 |x| (each part the nearest bf16 to what the parts
// before left), at every length around the 16-lane steps, on values of every magnitude.
TEST(AmxKernels, SplitIntoThreeBf16PartsKeepsFp32Precision) {
  if (!bf16_dot_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const LinearBf16Kernels& k = avx512bf16::kLinearBf16Kernels;
  std::mt19937_64 rng(5);
  for (int64_t n : {1, 15, 16, 17, 33, 1000}) {
    std::vector<float> x = randn(rng, n);
    for (int64_t i = 0; i < n; ++i) x[i] *= std::ldexp(1.0f, static_cast<int>(i % 61) - 30);
    if (n > 3) x[1] = 0.0f, x[2] = -3.0f, x[3] = 1.0f + std::ldexp(1.0f, -23);
    std::vector<uint16_t> hi(n + 1, 0xabcd), mid(n + 1, 0xabcd), lo(n + 1, 0xabcd);
    k.split3_bf16(x.data(), n, hi.data(), mid.data(), lo.data());
    for (int64_t i = 0; i < n; ++i) {
      const double back = double(bf16_to_f32(hi[i])) + bf16_to_f32(mid[i]) + bf16_to_f32(lo[i]);
      ASSERT_LE(std::fabs(back - x[i]), std::ldexp(std::fabs(double(x[i])), -26))
          << "n=" << n << " i=" << i << " x=" << x[i];
      ASSERT_EQ(hi[i], f32_to_bf16(x[i])) << "the first part is x rounded, as bf16 precision";
    }
    EXPECT_EQ(hi[n], 0xabcd) << "wrote past n";
    EXPECT_EQ(lo[n], 0xabcd) << "wrote past n";
  }
}

// An MXFP4 row decoded with a stride between its 32-value groups (straight into A tiles) is the
// contiguous decode, group by group, and writes nothing between the groups.
TEST(AmxKernels, StridedMxfp4DecodeEqualsTheContiguousOne) {
  if (!bf16_dot_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const LinearBf16Kernels& k = avx512bf16::kLinearBf16Kernels;
  std::mt19937_64 rng(17);
  for (int64_t cols : {32, 96, 1024}) {
    Weight w = random_weight(rng, 1, cols, MatFormat::mxfp4);
    std::vector<uint16_t> row(cols), strided(cols / 32 * amx::kAStride, 0xabcd);
    k.mxfp4_decode(w.bytes.data(), w.mat.scales, cols, row.data());
    k.mxfp4_decode_strided(w.bytes.data(), w.mat.scales, cols, strided.data(), amx::kAStride);
    for (int64_t i = 0; i < static_cast<int64_t>(strided.size()); ++i) {
      const int64_t g = i / amx::kAStride, e = i % amx::kAStride;
      ASSERT_EQ(strided[i], e < 32 ? row[g * 32 + e] : uint16_t{0xabcd}) << "cols=" << cols;
    }
  }
}

// Weights packed as contiguous A tiles give the same sums, bit for bit, as the tiles read from
// the matrix rows, and only the rows asked for: every tile count of a task (1..4 and tails),
// token counts around the 16-token tiles, one to many chunks.
TEST(AmxKernels, PackedTilesEqualTheStridedOnes) {
  if (!bf16_amx_available()) GTEST_SKIP() << "this CPU (or its OS) has no usable AMX-BF16";
  const LinearBf16Kernels& k = avx512bf16::kLinearBf16Kernels;
  for (auto [nr, cols] : kAmxTaskShapes) {
    for (int64_t T : {1, 2, 15, 16, 17, 48, 50}) {
      const int64_t ldy = nr + 3;
      std::mt19937_64 rng(43 + T * 131 + nr * 7 + cols);
      Weight w = random_weight(rng, nr, cols, MatFormat::bf16);
      const std::vector<float> x = randn(rng, T * cols);
      std::vector<uint16_t> xb(T * cols), xp(amx::packed_x_size(T, cols));
      k.round_bf16(x.data(), T * cols, xb.data());
      amx::pack_x(xb.data(), T, cols, xp.data());
      const auto* rows = reinterpret_cast<const uint16_t*>(w.bytes.data());
      std::vector<float> strided(T * ldy, -7.0f), packed(T * ldy, -7.0f);
      amx::gemv_bf16(xp.data(), T, rows, cols, 0, nr, strided.data(), ldy);
      std::vector<uint16_t> a(amx::packed_a_size(nr, cols) + 32, 0x7fc1);  // NaN filler
      uint16_t* a64 = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(a.data()) + 63) &
                                                  ~uintptr_t{63});
      for (int64_t j = 0; j < nr; ++j) amx::pack_a_row(rows + j * cols, j, cols, a64);
      amx::zero_a_rows(nr, nr, cols, a64);
      amx::gemm_packed(xp.data(), T, a64, cols, nr, packed.data(), ldy);
      for (int64_t i = 0; i < T * ldy; ++i)
        ASSERT_EQ(packed[i], strided[i]) << "T=" << T << " nr=" << nr << " cols=" << cols
                                         << " t=" << i / ldy << " j=" << i % ldy;
    }
  }
}

// linear in fp32 precision on the tiles: the fp32 tolerance against double arithmetic on the
// unrounded activations (bf16 precision would miss it on these shapes: checked), as accurate as
// the fp32 FMA kernels on the same inputs, and a token's
// outputs alone equal to its outputs among 2..70 tokens (three parts a token: 16-column tiles
// hold parts of different tokens), BF16 and MXFP4, a row tail off the 64-row tasks.
TEST(AmxKernels, Fp32LinearOnTilesMatchesReferenceAndIsBatchInvariant) {
  if (!bf16_amx_available()) GTEST_SKIP() << "this CPU (or its OS) has no usable AMX-BF16";
  const Precision saved = active_precision();
  for (MatFormat f : {MatFormat::bf16, MatFormat::mxfp4}) {
    const int64_t rows = 300, cols = 1056, most = 70;
    std::mt19937_64 rng(77 + static_cast<int>(f));
    Weight w = random_weight(rng, rows, cols, f);
    const std::vector<float> x = randn(rng, most * cols);
    const Ref ref = reference_linear(x, most, w.mat, /*round_x=*/false);
    const std::vector<double>& want = ref.y;
    const double scale = ref.scale;

    set_precision(Precision::bf16);  // the shape is hard enough that bf16 rounding shows
    set_bf16_amx_allowed(true);
    std::vector<float> rounded(most * rows);
    linear(x.data(), most, w.mat, rounded.data());
    ASSERT_GT(rel_max_error(rounded, want, scale), 20 * kTol) << "shape too easy";

    // Without K3_AMX (the default) fp32 runs on the FMA kernels.
    set_precision(Precision::fp32);
    set_bf16_amx_allowed(false);
    std::vector<float> fma(most * rows);
    linear(x.data(), most, w.mat, fma.data());
    const double fma_error = rel_max_error(fma, want, scale);

    set_bf16_amx_allowed(true);
    std::vector<float> one(most * rows);
    for (int64_t t = 0; t < most; ++t) linear(x.data() + t * cols, 1, w.mat, &one[t * rows]);
    const double error = rel_max_error(one, want, scale);
    EXPECT_LE(error, kTol) << format_name(f);
    // The tolerance would pass two parts too (x to 2^-17: measured 5e-7 here): as accurate as
    // the FMA kernels (3e-8 both) is what says the third part is there.
    EXPECT_LE(error, 2 * fma_error + 1e-9) << format_name(f) << " FMA kernels: " << fma_error;
    expect_batch_invariant(x, w.mat, one, {2, 5, 6, 16, 17, 33, 70}, format_name(f));
  }
  set_amx_use(amx_use_from_env());
  set_precision(saved);
}

// Which matrices take the tiles under each AmxUse: by default (wide) only fp32's matrices of at
// least 2048 columns — a 1056-column one gives the FMA kernels' bits, a 2048-column one the
// tiles' — and bf16 precision none; K3_AMX=1 (all) both; K3_AMX=0 (off) none.
TEST(AmxKernels, DefaultUseTakesOnlyFp32sWideMatrices) {
  if (!bf16_amx_available()) GTEST_SKIP() << "this CPU (or its OS) has no usable AMX-BF16";
  const Precision saved = active_precision();
  auto run = [](const Weight& w, const std::vector<float>& x, int64_t T, Precision p, AmxUse use) {
    set_precision(p);
    set_amx_use(use);
    std::vector<float> y(T * w.mat.rows);
    linear(x.data(), T, w.mat, y.data());
    return y;
  };
  std::mt19937_64 rng(91);
  const int64_t T = 5;
  for (int64_t cols : {1056, 2048}) {
    Weight w = random_weight(rng, 256, cols, MatFormat::mxfp4);
    const std::vector<float> x = randn(rng, T * cols);
    const bool wide = cols >= 2048;
    for (Precision p : {Precision::fp32, Precision::bf16}) {
      const auto off = run(w, x, T, p, AmxUse::off), all = run(w, x, T, p, AmxUse::all);
      const auto dflt = run(w, x, T, p, AmxUse::wide);
      ASSERT_NE(off, all) << "cols=" << cols << ": the tiles sum in another order";
      EXPECT_EQ(dflt, wide && p == Precision::fp32 ? all : off)
          << "cols=" << cols << " precision " << precision_name(p);
    }
  }
  set_amx_use(amx_use_from_env());
  set_precision(saved);
}

}  // namespace
}  // namespace k3::test
