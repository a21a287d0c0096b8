#include "ops/linear/linear.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/launchers.h"

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12 flags its own _mm512_reduce_add_ps (an undefined-vector idiom) as uninitialised.
#if !defined(__clang__)  // clang does not know the second one
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

#include "core/bf16.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/mxfp4/mxfp4.h"

namespace k3 {

void mat_row(const Mat& w, int64_t r, float* out) {
  switch (w.format) {
    case MatFormat::f32: {
      const float* p = static_cast<const float*>(w.data) + r * w.cols;
      for (int64_t i = 0; i < w.cols; ++i) out[i] = p[i];
      break;
    }
    case MatFormat::bf16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + r * w.cols;
      int64_t i = 0;
#if defined(__AVX512F__)
      for (; i + 16 <= w.cols; i += 16) {  // widen 16 at a time: bf16 is the top half of fp32
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
        _mm512_storeu_si512(out + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
      }
#endif
      for (; i < w.cols; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
    case MatFormat::mxfp4: {
      const uint8_t* p = static_cast<const uint8_t*>(w.data) + r * (w.cols / 2);
      mxfp4_decode_row(p, w.scales + r * (w.cols / kMxfp4Group), w.cols, out);
      break;
    }
  }
}

void linear_ref(const float* x, int64_t T, const Mat& w, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    mat_row(w, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      double acc = 0;
      for (int64_t i = 0; i < w.cols; ++i) acc += static_cast<double>(x[t * w.cols + i]) * row[i];
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

namespace {

// 8 independent partial sums so the compiler can vectorise without -ffast-math.
inline float dot(const float* a, const float* b, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  }
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

constexpr int64_t kRowsPerBlock = 8;  // weight rows decoded together
constexpr int64_t kTileT = 4;         // tokens per register tile
constexpr int64_t kTileR = 4;         // weight rows per register tile

#if defined(__AVX512F__)
// Batch invariance: every output y[t, r] is summed in one canonical order whichever path
// computes it (a 4x4 tile, a lone row, the fused BF16/MXFP4 decode dots) and however many rows
// the call has: one 16-lane accumulator over 16-column chunks in column order, then
// _mm512_reduce_add_ps. So a sequence's logits do not depend on what else is in its step.
// (Requires cols % 16 == 0; other widths use the scalar `dot` everywhere.)

// y[t0+a, r0+b] for a 4x4 tile: 16 accumulators, each weight and input vector loaded once per
// 16 columns.
void tile_4x4(const float* x, int64_t ldx, const float* w, int64_t cols, float* y, int64_t ldy) {
  __m512 acc[kTileT][kTileR];
  for (auto& row : acc)
    for (auto& a : row) a = _mm512_setzero_ps();
  for (int64_t i = 0; i < cols; i += 16) {
    __m512 wv[kTileR];
    for (int64_t b = 0; b < kTileR; ++b) wv[b] = _mm512_loadu_ps(w + b * cols + i);
    for (int64_t a = 0; a < kTileT; ++a) {
      const __m512 xv = _mm512_loadu_ps(x + a * ldx + i);
      for (int64_t b = 0; b < kTileR; ++b) acc[a][b] = _mm512_fmadd_ps(xv, wv[b], acc[a][b]);
    }
  }
  for (int64_t a = 0; a < kTileT; ++a)
    for (int64_t b = 0; b < kTileR; ++b) y[a * ldy + b] = _mm512_reduce_add_ps(acc[a][b]);
}
constexpr bool kHaveTile = true;

// One output in the canonical order (the tile's arithmetic for a single row).
float dot16(const float* x, const float* w, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(w + i), acc);
  return _mm512_reduce_add_ps(acc);
}

inline __m512 widen_bf16(const uint16_t* w) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}

// Σ_i x[i]·bf16(w[i]) for two weight rows at once (two independent FMA chains), the widening
// fused into the loop (decode: the weights stream from memory once). Canonical order per row.
void dot_bf16_x2(const float* x, const uint16_t* w0, const uint16_t* w1, int64_t n, float* y0,
                 float* y1) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
    acc0 = _mm512_fmadd_ps(xv, widen_bf16(w0 + i), acc0);
    acc1 = _mm512_fmadd_ps(xv, widen_bf16(w1 + i), acc1);
  }
  *y0 = _mm512_reduce_add_ps(acc0);
  *y1 = _mm512_reduce_add_ps(acc1);
}

// Small T with BF16 weights: one fused pass per pair of weight rows, no widened copy.
bool linear_bf16_small_t(const float* x, int64_t T, const Mat& w, float* y) {
  if (w.format != MatFormat::bf16 || T > 2 || w.cols % 16 != 0) return false;
  const uint16_t* base = static_cast<const uint16_t*>(w.data);
  const int64_t n_pairs = (w.rows + 1) / 2;
  parallel_for(n_pairs, w.rows * w.cols > 32768, [&](int64_t p) {
    const int64_t r0 = 2 * p, r1 = std::min(r0 + 1, w.rows - 1);  // odd count: last row twice
    for (int64_t t = 0; t < T; ++t) {
      float y0, y1;
      dot_bf16_x2(x + t * w.cols, base + r0 * w.cols, base + r1 * w.cols, w.cols, &y0, &y1);
      y[t * w.rows + r0] = y0;
      y[t * w.rows + r1] = y1;
    }
  });
  return true;
}

// Small T with MXFP4 weights: decode fused into the dot product, one pass per row.
bool linear_mxfp4_small_t(const float* x, int64_t T, const Mat& w, float* y) {
  if (w.format != MatFormat::mxfp4 || T > 2) return false;
  const uint8_t* packed = static_cast<const uint8_t*>(w.data);
  const int64_t pb = w.cols / 2, sb = w.cols / kMxfp4Group;
  parallel_for(w.rows, w.rows * w.cols > 32768, [&](int64_t r) {
    for (int64_t t = 0; t < T; ++t) {
      y[t * w.rows + r] = mxfp4_dot_row(packed + r * pb, w.scales + r * sb, x + t * w.cols, w.cols);
    }
  });
  return true;
}
#else
// Without AVX-512 every path decodes rows and uses the scalar `dot` (batch invariant).
void tile_4x4(const float*, int64_t, const float*, int64_t, float*, int64_t) {}
float dot16(const float*, const float*, int64_t) { return 0; }
bool linear_bf16_small_t(const float*, int64_t, const Mat&, float*) { return false; }
bool linear_mxfp4_small_t(const float*, int64_t, const Mat&, float*) { return false; }
constexpr bool kHaveTile = false;
#endif

// y[t, r0..r0+nr) for all t, from nr decoded rows.
void block_product(const float* x, int64_t T, const float* rows, int64_t nr, int64_t cols,
                   int64_t ld_y, int64_t r0, float* y) {
  int64_t t = 0;
  if (kHaveTile && cols % 16 == 0) {  // the canonical order everywhere: tiles, then dot16

    for (; t + kTileT <= T; t += kTileT) {
      int64_t j = 0;
      for (; j + kTileR <= nr; j += kTileR) {
        tile_4x4(x + t * cols, cols, rows + j * cols, cols, y + t * ld_y + r0 + j, ld_y);
      }
      for (; j < nr; ++j) {
        for (int64_t a = 0; a < kTileT; ++a)
          y[(t + a) * ld_y + r0 + j] = dot16(x + (t + a) * cols, rows + j * cols, cols);
      }
    }
    for (; t < T; ++t) {
      for (int64_t j = 0; j < nr; ++j)
        y[t * ld_y + r0 + j] = dot16(x + t * cols, rows + j * cols, cols);
    }
    return;
  }
  for (; t < T; ++t) {
    for (int64_t j = 0; j < nr; ++j)
      y[t * ld_y + r0 + j] = dot(x + t * cols, rows + j * cols, cols);
  }
}

}  // namespace

void linear(const float* x, int64_t T, const Mat& w, float* y) {
  if (linear_bf16_small_t(x, T, w, y) || linear_mxfp4_small_t(x, T, w, y)) return;
  const int64_t n_blocks = (w.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  parallel_for(n_blocks, w.rows * w.cols * T > 32768, [&](int64_t b) {
    float* rows = thread_scratch<float, struct LinearRowsTag>(kRowsPerBlock * w.cols);
    const int64_t r0 = b * kRowsPerBlock;
    const int64_t nr = std::min(kRowsPerBlock, w.rows - r0);
    for (int64_t j = 0; j < nr; ++j) mat_row(w, r0 + j, rows + j * w.cols);
    block_product(x, T, rows, nr, w.cols, w.rows, r0, y);
  });
}

const OpTable<LinearFn, LinearBwdFn> kLinearOp =
    register_op<LinearFn, LinearBwdFn>({.name = "linear",
                                        .ref = linear_ref,
                                        .cpu = linear,
                                        .cuda = K3_CUDA_IMPL(linear_cuda),
                                        .bwd = linear_bwd});

}  // namespace k3
