// linear in bf16 precision (core/precision.h): the activations rounded to bf16 once per call
// (every row of x), the weights exact, fp32 accumulation.
//
//   native (AVX512_BF16): x as bf16, vdpbf16ps tiles straight from BF16 storage at any T, and
//     from MXFP4 storage up to mxfp4_direct_max_t tokens; beyond, each block of rows decoded to
//     bf16 once (exact) and run through the BF16 tiles.
//   AMX (bf16_amx_native(), K3_AMX=1): the same products on tile registers, at every T
//     (linear_amx.cpp).
//   fallback (every other path): x rounded and widened back to fp32, then the fp32 kernels:
//     a bf16 value times a BF16 or MXFP4 weight is exact in fp32, so each FMA rounds only the
//     sum, as vdpbf16ps does (the two differ by the order of the fp32 additions only).
#include <algorithm>

#include "core/bf16.h"
#include "core/parallel.h"
#include "core/precision.h"
#include "core/scratch.h"
#include "ops/linear/linear_internal.h"
#include "ops/linear/linear_kernels.h"

namespace k3 {
namespace {

// y [T, w.rows] from xb [T, cols] bf16 with vdpbf16ps.
void linear_bf16_native(const LinearBf16Kernels& k, const uint16_t* xb, int64_t T, const Mat& w,
                        float* y) {
  if (w.format == MatFormat::bf16 || T <= k.mxfp4_direct_max_t) {
    const int64_t n_tasks = (w.rows + kGemvRows - 1) / kGemvRows;
    parallel_for(n_tasks, gemv_worth_splitting(T, w), [&](int64_t task) {
      const int64_t r0 = task * kGemvRows, nr = std::min(kGemvRows, w.rows - r0);
      if (w.format == MatFormat::bf16) {
        k.gemv_bf16(xb, T, static_cast<const uint16_t*>(w.data), w.cols, r0, nr, y, w.rows);
      } else {
        k.gemv_mxfp4(xb, T, static_cast<const uint8_t*>(w.data), w.scales, w.cols, r0, nr, y,
                     w.rows);
      }
    });
    return;
  }
  // MXFP4 at larger T: kRowsPerBlock rows decoded to bf16 [nr, cols], reused by every token.
  const int64_t n_blocks = (w.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t pb = w.cols / 2, sb = w.cols / 32;
  parallel_for(n_blocks, w.rows * w.cols * T > 32768, [&](int64_t b) {
    uint16_t* rows = thread_scratch<uint16_t, struct LinearBf16RowsTag>(kRowsPerBlock * w.cols);
    const int64_t r0 = b * kRowsPerBlock, nr = std::min(kRowsPerBlock, w.rows - r0);
    const uint8_t* packed = static_cast<const uint8_t*>(w.data);
    for (int64_t j = 0; j < nr; ++j)
      k.mxfp4_decode(packed + (r0 + j) * pb, w.scales + (r0 + j) * sb, w.cols, rows + j * w.cols);
    k.gemv_bf16(xb, T, rows, w.cols, 0, nr, y + r0, w.rows);
  });
}

// The same on AMX tiles, at every T (so that results stay batch invariant): x packed into the
// B-tile order once per call, tasks of kAmxRows weight rows (four A tiles against each B
// tile); MXFP4 rows decoded to bf16 (exactly) per task first.
constexpr int64_t kAmxRows = 64;
// The matrices the tiles take (core/precision.h, AmxUse): a property of the matrix, never of
// T, so results stay batch invariant. On small ones the per-call tile set-up and packing cost
// more than they save; by default only fp32's wide matrices (K3's widths), where the tiles
// were measured faster at decode too.
constexpr int64_t kAmxMinCols = 1024, kAmxWideCols = 2048, kAmxMinRows = 256;

bool amx_takes(const Mat& w, Precision p) {
  if (w.rows < kAmxMinRows || w.cols % 32 != 0 || !amx_native()) return false;
  switch (amx_use()) {
    case AmxUse::all:
      return w.cols >= kAmxMinCols;
    case AmxUse::wide:
      return p == Precision::fp32 && w.cols >= kAmxWideCols;
    case AmxUse::off:
      break;
  }
  return false;
}

void linear_bf16_amx(const LinearBf16Kernels& k, const uint16_t* xb, int64_t T, const Mat& w,
                     float* y) {
  const int64_t cols = w.cols;
  uint16_t* xp = thread_scratch<uint16_t, struct LinearAmxXTag>(amx::packed_x_size(T, cols));
  const int64_t n_token_tiles = (T + 15) / 16;  // pack_x's blocks of 16 tokens
  parallel_for(n_token_tiles, T * cols > 65536, [&](int64_t b) {
    amx::pack_x(xb + b * 16 * cols, std::min<int64_t>(16, T - b * 16), cols, xp + b * 16 * cols);
  });
  // Decode-size BF16 calls in tasks of kGemvRows rows as on the vdpbf16ps path (more tasks
  // than threads), the rest in kAmxRows: four weight tiles against each token tile.
  const int64_t task_rows = T <= 16 && w.format == MatFormat::bf16 ? kGemvRows : kAmxRows;
  const int64_t n_tasks = (w.rows + task_rows - 1) / task_rows;
  parallel_for(n_tasks, gemv_worth_splitting(T, w), [&](int64_t task) {
    const int64_t r0 = task * task_rows, nr = std::min(task_rows, w.rows - r0);
    if (w.format == MatFormat::bf16 && T <= 16) {  // one pass over the rows: straight from storage
      amx::gemv_bf16(xp, T, static_cast<const uint16_t*>(w.data), cols, r0, nr, y, w.rows);
      return;
    }
    // Otherwise the task's rows as contiguous A tiles (BF16 copied, MXFP4 decoded), read by
    // every token tile from L2.
    uint16_t* a =
        thread_scratch<uint16_t, struct LinearAmxATag>(amx::packed_a_size(kAmxRows, cols) + 32);
    a = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(a) + 63) & ~uintptr_t{63});
    const uint8_t* packed = static_cast<const uint8_t*>(w.data);
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t r = r0 + j;
      if (w.format == MatFormat::bf16) {
        amx::pack_a_row(static_cast<const uint16_t*>(w.data) + r * cols, j, cols, a);
      } else {
        k.mxfp4_decode_strided(packed + r * (cols / 2), w.scales + r * (cols / 32), cols,
                               amx::a_row_start(j, cols, a), amx::kAStride);
      }
    }
    amx::zero_a_rows(nr, nr, cols, a);
    amx::gemm_packed(xp, T, a, cols, nr, y + r0, w.rows);
  });
}

}  // namespace

// fp32 precision on AMX tiles: the three parts of each token run as three tokens of the bf16
// tile product (each product exact, fp32 accumulation in column order), then y = (hi·w +
// mid·w) + lo·w. Every token takes the same steps whatever the batch: batch invariant.
bool linear_fp32_amx(const float* x, int64_t T, const Mat& w, float* y) {
  if (w.format == MatFormat::f32 || w.keep_fp32 || !amx_takes(w, Precision::fp32)) return false;
  const LinearBf16Kernels& k = avx512bf16::kLinearBf16Kernels;
  const int64_t cols = w.cols, rows = w.rows;
  // The three partial outputs of a block of tokens are held at once: blocks small enough for
  // ~64 MB of them (a 163840-row LM head over every position of a 512-token window would want
  // 1 GB). A token's sums do not depend on its block.
  constexpr int64_t kPartsBytes = int64_t{64} << 20;
  const int64_t block = std::max<int64_t>(16, std::min(T, kPartsBytes / (12 * rows)));
  uint16_t* xs = thread_scratch<uint16_t, struct LinearAmx3XTag>(3 * block * cols);  // [3Tb, cols]
  float* y3 = thread_scratch<float, struct LinearAmx3YTag>(3 * block * rows);        // [3Tb, rows]
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    const int64_t tb = std::min(block, T - t0);
    const float* xb = x + t0 * cols;
    float* yb = y + t0 * rows;
    parallel_for(tb, tb * cols > 65536, [&](int64_t t) {  // row 3t + p: part p of x[t]
      uint16_t* parts = xs + 3 * t * cols;
      k.split3_bf16(xb + t * cols, cols, parts, parts + cols, parts + 2 * cols);
    });
    linear_bf16_amx(k, xs, 3 * tb, w, y3);
    parallel_for(tb, tb * rows > 65536, [&](int64_t t) {
      const float* part = y3 + 3 * t * rows;
      for (int64_t r = 0; r < rows; ++r)
        yb[t * rows + r] = (part[r] + part[rows + r]) + part[2 * rows + r];
    });
  }
  return true;
}

void round_to_bf16_values(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

void linear_bf16(const float* x, int64_t T, const Mat& w, float* y) {
  const LinearBf16Kernels& k = avx512bf16::kLinearBf16Kernels;
  if (bf16_dot_native() && w.cols % k.lanes == 0) {
    uint16_t* xb = thread_scratch<uint16_t, struct LinearBf16XTag>(T * w.cols);  // [T, cols]
    // Rounded in chunks over the threads: on the caller alone a 512-token prefill's rounding
    // was 2.5% of its time at -t 2 (the other thread waiting).
    constexpr int64_t kChunk = 16384;
    const int64_t n = T * w.cols;
    parallel_for((n + kChunk - 1) / kChunk, n > 2 * kChunk, [&](int64_t c) {
      k.round_bf16(x + c * kChunk, std::min(kChunk, n - c * kChunk), xb + c * kChunk);
    });
    if (amx_takes(w, Precision::bf16)) {
      linear_bf16_amx(k, xb, T, w, y);
    } else {
      linear_bf16_native(k, xb, T, w, y);
    }
    return;
  }
  float* xr = thread_scratch<float, struct LinearBf16XrTag>(T * w.cols);  // [T, cols]
  round_to_bf16_values(x, T * w.cols, xr);
  linear_fp32(xr, T, w, y);
}

}  // namespace k3
