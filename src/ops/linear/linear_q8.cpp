// linear in q8 precision (core/precision.h) for MXFP4 weights: each activation row quantised
// once to int8 in blocks of 32 (one fp32 scale per block, as llama.cpp's Q8_0), integer dots
// with the E2M1 values doubled (integers -12 .. 12), then scaled by E8M0 * d / 2 in fp32.
// Layout and the one summation order every path keeps: linear_kernels.h (LinearQ8Kernels).
// The scalar kernel here follows that order literally; the AVX2 and AVX-512 VNNI kernels
// (linear_q8_avx2.cpp, linear_q8_avx512vnni.cpp) reproduce it bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cpu_isa.h"
#include "core/parallel.h"
#include "core/precision.h"
#include "core/scratch.h"
#include "ops/linear/linear_internal.h"
#include "ops/linear/linear_kernels.h"
#include "ops/mxfp4/mxfp4.h"

namespace k3 {
namespace {

constexpr int64_t kBlock = 32;

// 2 * E2M1 of nibble n (sign bit 3): the integers 0, 1, 2, 3, 4, 6, 8, 12 with sign.
constexpr int kTwiceE2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

int64_t windows(int64_t cols) { return (cols / kBlock + kQ8WinBlocks - 1) / kQ8WinBlocks; }

// Lane of block `blk` (< 16) of a window: lane 4b + g holds block 4g + b.
int64_t lane_of(int64_t blk) { return 4 * (blk % 4) + blk / 4; }

// One row x[cols] into out[q8_row_bytes(cols)]. q = round-to-nearest-even(x * 127 / max|x|)
// (in double: no overflow for tiny max|x|); a block with a NaN or an infinity gets q = 0 and a
// non-finite d, so the output turns NaN as the fp32 path's would.
void quantize_row(const float* x, int64_t cols, uint8_t* out) {
  std::memset(out, 0, static_cast<size_t>(windows(cols) * kQ8WinBytes));
  for (int64_t gb = 0; gb < cols / kBlock; ++gb) {
    const float* xb = x + gb * kBlock;
    uint8_t* win = out + (gb / kQ8WinBlocks) * kQ8WinBytes;
    const int64_t blk = gb % kQ8WinBlocks, g = blk / 4, b = blk % 4, lane = lane_of(blk);
    float amax = 0;
    bool finite = true;
    for (int64_t i = 0; i < kBlock; ++i) {
      finite = finite && std::isfinite(xb[i]);
      amax = std::max(amax, std::fabs(xb[i]));
    }
    int32_t sum = 0;
    if (finite && amax > 0) {
      const double inv = 127.0 / amax;
      for (int64_t i = 0; i < kBlock; ++i) {
        const double v = std::nearbyint(static_cast<double>(xb[i]) * inv);
        const int q = static_cast<int>(std::clamp(v, -127.0, 127.0));
        sum += q;
        // even columns at 16b + i/2, odd ones 64 bytes further (the nibble order)
        win[128 * g + (i % 2) * 64 + 16 * b + i / 2] = static_cast<uint8_t>(static_cast<int8_t>(q));
      }
    }
    const int32_t corr = 12 * sum;
    const float dh = finite ? amax / 127.0f * 0.5f : std::numeric_limits<float>::quiet_NaN();
    std::memcpy(win + 512 + 4 * lane, &corr, 4);
    std::memcpy(win + 576 + 4 * lane, &dh, 4);
  }
}

// The scalar kernel: the canonical order of linear_kernels.h, one output at a time.
void gemv_scalar(const uint8_t* xq, int64_t T, const uint8_t* packed, const uint8_t* scales,
                 int64_t cols, int64_t r0, int64_t nr, float* y, int64_t ldy) {
  const int64_t nb = cols / kBlock, n_win = windows(cols), rb = n_win * kQ8WinBytes;
  for (int64_t r = r0; r < r0 + nr; ++r) {
    const uint8_t* prow = packed + r * (cols / 2);
    for (int64_t t = 0; t < T; ++t) {
      float acc[16] = {};
      for (int64_t w = 0; w < n_win; ++w) {
        const uint8_t* xw = xq + t * rb + w * kQ8WinBytes;
        for (int64_t blk = 0; blk < kQ8WinBlocks; ++blk) {
          const int64_t gb = w * kQ8WinBlocks + blk, g = blk / 4, b = blk % 4;
          int32_t isum = 0;
          uint8_t e = 0;  // blocks past the row: zero weights, scale byte 0, as the SIMD paths
          if (gb < nb) {
            for (int64_t i = 0; i < 16; ++i) {
              const uint8_t p = prow[gb * 16 + i];
              const auto even = static_cast<int8_t>(xw[128 * g + 16 * b + i]);
              const auto odd = static_cast<int8_t>(xw[128 * g + 64 + 16 * b + i]);
              isum += kTwiceE2m1[p & 15] * even + kTwiceE2m1[p >> 4] * odd;
            }
            e = scales[r * nb + gb];
          }
          const int64_t l = lane_of(blk);
          float dh;
          std::memcpy(&dh, xw + 576 + 4 * l, 4);
          const float ws = std::ldexp(1.0f, static_cast<int>(e) - 127);  // 255: +inf
          acc[l] = std::fma(static_cast<float>(isum), ws * dh, acc[l]);
        }
      }
      float s8[8], s4[4];
      for (int i = 0; i < 8; ++i) s8[i] = acc[i] + acc[i + 8];
      for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
      const float s2a = s4[0] + s4[2], s2b = s4[1] + s4[3];
      y[t * ldy + r] = s2a + s2b;
    }
  }
}

using Q8GemvFn = void(const uint8_t*, int64_t, const uint8_t*, const uint8_t*, int64_t, int64_t,
                      int64_t, float*, int64_t);

// The avx512 path takes the VNNI kernel where the CPU has AVX512_VNNI, else the AVX2 one.
Q8GemvFn* q8_gemv() {
  return isa_pick<Q8GemvFn>(
      gemv_scalar, avx2::kLinearQ8Kernels.gemv,
      cpu_features().avx512_vnni ? avx512vnni::kLinearQ8Kernels.gemv : nullptr);
}

}  // namespace

const char* q8_kernel_name() {
  Q8GemvFn* f = q8_gemv();
  if (f == avx512vnni::kLinearQ8Kernels.gemv) return "avx512vnni";
  return f == avx2::kLinearQ8Kernels.gemv ? "avx2" : "scalar";
}

bool linear_takes_q8(const Mat& w) {
  return active_precision() == Precision::q8 && w.format == MatFormat::mxfp4 && !w.keep_fp32;
}

int64_t q8_row_bytes(int64_t cols) { return windows(cols) * kQ8WinBytes; }

void q8_quantize(const float* x, int64_t T, int64_t cols, uint8_t* xq) {
  K3_CHECK(cols % kBlock == 0, "q8: cols ", cols, " is not a multiple of 32");
  const int64_t rb = q8_row_bytes(cols);
  parallel_for(T, T * cols > 65536,
               [&](int64_t t) { quantize_row(x + t * cols, cols, xq + t * rb); });
}

void linear_q8_rows(const uint8_t* xq, int64_t T, const Mat& w, int64_t r0, int64_t nr, float* y,
                    int64_t ldy) {
  q8_gemv()(xq, T, static_cast<const uint8_t*>(w.data), w.scales, w.cols, r0, nr, y, ldy);
}

void linear_q8(const float* x, int64_t T, const Mat& w, float* y) {
  uint8_t* xq = thread_scratch<uint8_t, struct LinearQ8XTag>(T * q8_row_bytes(w.cols));
  q8_quantize(x, T, w.cols, xq);
  Q8GemvFn* gemv = q8_gemv();
  const int64_t n_tasks = (w.rows + kGemvRows - 1) / kGemvRows;
  parallel_for(n_tasks, gemv_worth_splitting(T, w), [&](int64_t task) {
    const int64_t r0 = task * kGemvRows, nr = std::min(kGemvRows, w.rows - r0);
    gemv(xq, T, static_cast<const uint8_t*>(w.data), w.scales, w.cols, r0, nr, y, w.rows);
  });
}

}  // namespace k3
