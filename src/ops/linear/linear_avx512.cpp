// linear / MXFP4 kernels for AVX-512 (F, BW, VL, DQ), 16 lanes. Built with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq (CMakeLists.txt: files named *_avx512.cpp); runs only when cpu_isa
// picks avx512. The same structure as linear_avx2.cpp.
#include <immintrin.h>

#include <cstdint>

#include "ops/linear/avx512_tile.h"
#include "ops/linear/linear_kernels.h"
#include "ops/linear/prefetch.h"

// GCC 12 flags its own _mm512_reduce_add_ps (an undefined-vector idiom) as uninitialised.
#if !defined(__clang__)  // clang does not know the second one
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace k3::avx512 {
namespace {

constexpr int64_t kLanes = 16;

inline __m512 load_bf16(const uint16_t* p) {  // 16 bf16 -> fp32 (exact: the top halves)
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}

// E8M0 scale 2^(s-127) (0: the subnormal 2^-127; 255: infinity, as the scalar path).
inline float e8m0(uint8_t s) {
  const uint32_t bits = s == 0 ? 0x00400000u : s == 255 ? 0x7f800000u : uint32_t{s} << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// Sixteen E8M0 scales (n <= 16 of them; the rest read as 0) as floats, as e8m0() each.
inline __m512 e8m0x16(const uint8_t* s, int64_t n) {
  const __mmask16 valid = n >= 16 ? 0xffff : static_cast<__mmask16>((1u << n) - 1);
  const __m512i e = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(valid, s));
  __m512i bits = _mm512_slli_epi32(e, 23);
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()),
                               _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255)),
                               _mm512_set1_epi32(0x7f800000));
  return _mm512_castsi512_ps(bits);
}

// One MXFP4 group (16 bytes, 32 values) as two vectors, elements 0-15 and 16-31, in element
// order with no interleaving step: the 16 bytes are broadcast to the four 128-bit lanes, one
// in-lane byte shuffle per vector puts byte i/2 in the low byte of lane i, a variable shift
// brings the high nibble down in the odd lanes, and one permute looks the nibbles up in the
// scaled 16-entry signed table (the permute reads only the index's low four bits, so nothing
// needs masking). Per group: 1 broadcast load, 2 byte shuffles, 2 shifts, 1 multiply, 2
// permutes (the previous form took a widening load, 2 permutes and 2 two-source interleaves).
struct GroupDecoder {
  __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f,
                                -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
  // Lane i of the first vector takes byte i/2, of the second byte 8 + i/2 (the shuffle's index
  // is within each 128-bit lane, which holds all 16 bytes).
  __m512i first_bytes = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  __m512i second_bytes =
      _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  __m512i nibble_shift = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);

  void operator()(const uint8_t* bytes16, float scale, __m512& first, __m512& second) const {
    const __m512 scaled = _mm512_mul_ps(table, _mm512_set1_ps(scale));
    const __m512i b =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16)));
    const __m512i i0 = _mm512_srlv_epi32(_mm512_shuffle_epi8(b, first_bytes), nibble_shift);
    const __m512i i1 = _mm512_srlv_epi32(_mm512_shuffle_epi8(b, second_bytes), nibble_shift);
    first = _mm512_permutexvar_ps(i0, scaled);
    second = _mm512_permutexvar_ps(i1, scaled);
  }
};

// MXFP4 weights in this file's summation order for them (linear_kernels.h,
// mxfp4_decode_pairs): a group as its 16 even elements, then its 16 odd ones. The low nibbles
// of the 16 bytes are the even elements, the high ones the odd: one widening load, one shift
// and two permutes into the scaled table (which reads only the index's low four bits), with no
// byte shuffle or interleave. Microbenchmark, 512 x 512 in cache, one thread: 12.0 GB/s against
// 8.6 for GroupDecoder and its natural order.
struct PairDecoder {
  __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f,
                                -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);

  void operator()(const uint8_t* bytes16, float scale, __m512& even, __m512& odd) const {
    const __m512 scaled = _mm512_mul_ps(table, _mm512_set1_ps(scale));
    const __m512i b =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16)));
    even = _mm512_permutexvar_ps(b, scaled);
    odd = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), scaled);
  }
};

// The 32 inputs of a group (two vectors, natural order) as its even and odd columns.
struct PairColumns {
  __m512i even_idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  __m512i odd_idx = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);

  void operator()(const float* x32, __m512& even, __m512& odd) const {
    const __m512 lo = _mm512_loadu_ps(x32), hi = _mm512_loadu_ps(x32 + 16);
    even = _mm512_permutex2var_ps(lo, even_idx, hi);
    odd = _mm512_permutex2var_ps(lo, odd_idx, hi);
  }
};

void widen_bf16(const uint16_t* p, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_ps(out + i, load_bf16(p + i));
  for (; i < n; ++i) {
    const uint32_t u = uint32_t{p[i]} << 16;
    __builtin_memcpy(out + i, &u, 4);
  }
}

// A row's groups through a decoder: each group's 32 values as two vectors, stored in turn.
template <class Decoder>
void mxfp4_decode_row(const uint8_t* packed, const uint8_t* scales, int64_t cols, float* out) {
  const Decoder decode;
  for (int64_t g = 0; g < cols / 32; ++g) {
    __m512 first, second;
    decode(packed + g * 16, e8m0(scales[g]), first, second);
    _mm512_storeu_ps(out + g * 32, first);
    _mm512_storeu_ps(out + g * 32 + 16, second);
  }
}

void mxfp4_decode(const uint8_t* packed, const uint8_t* scales, int64_t cols, float* out) {
  mxfp4_decode_row<GroupDecoder>(packed, scales, cols, out);
}

// mxfp4_decode in the pair order: each group's even elements, then its odd ones.
void mxfp4_decode_pairs(const uint8_t* packed, const uint8_t* scales, int64_t cols, float* out) {
  mxfp4_decode_row<PairDecoder>(packed, scales, cols, out);
}

void pair_columns(const float* x, int64_t n_rows, int64_t cols, float* out) {
  const PairColumns pair;
  for (int64_t i = 0; i < n_rows * cols; i += 32) {
    __m512 even, odd;
    pair(x + i, even, odd);
    _mm512_storeu_ps(out + i, even);
    _mm512_storeu_ps(out + i + 16, odd);
  }
}

// A weight sweep (a lone token's GEMV, and the first pass of a small batch over its rows) is
// bound by memory latency as much as by bandwidth: a tile's rows are short streams (one row is
// a few KB) that the hardware prefetcher barely ramps up on, so the tile asks for the same
// lines four tiles ahead (the rows of consecutive tiles are consecutive in memory), into L2:
// into L1 (T0) those lines, 64-200 KB ahead, are evicted from the 32 KB L1 before use
// (microbenchmark: 11-13 GB/s with T0, 17-21 with T1; K3-small decode at -t 1: +35%).
// Prefetches past the end of the weights are harmless (they never fault).
// The helpers: ops/linear/prefetch.h.

// y[a, b] for an A-token x B-row tile read straight from the BF16 weights (widened in
// registers, exact): A*B accumulators, each weight and input vector loaded once per 16 columns.
// row[b] for b >= nb repeats a valid row (computed, not stored). prefetch_ahead > 0: each
// row's line that far ahead is prefetched as the tile reaches a line.
template <int A, int B>
void tile_bf16(const float* x, int64_t ldx, const uint16_t* const* row, int64_t nb, int64_t cols,
               float* y, int64_t ldy, int64_t prefetch_ahead) {
  __m512 acc[A][B];
#pragma GCC unroll 8
  for (int a = 0; a < A; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) acc[a][b] = _mm512_setzero_ps();
  for (int64_t i = 0; i < cols; i += kLanes) {
    if (prefetch_ahead > 0 && i % kBf16PerLine == 0) prefetch_rows<B>(row, i + prefetch_ahead);
    if constexpr (A == 1) {  // each weight vector used once: no array of them (no spills)
      const __m512 xv = _mm512_loadu_ps(x + i);
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[0][b] = _mm512_fmadd_ps(xv, load_bf16(row[b] + i), acc[0][b]);
      continue;
    }
    __m512 wv[B];
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) wv[b] = load_bf16(row[b] + i);
#pragma GCC unroll 8
    for (int a = 0; a < A; ++a) {
      const __m512 xv = _mm512_loadu_ps(x + a * ldx + i);
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[a][b] = _mm512_fmadd_ps(xv, wv[b], acc[a][b]);
    }
  }
  store_tile<A, B>(acc, nb, y, ldy);
}

// A tokens against rows [r0, r0+nr), B rows at a time; with `fetch` (the first pass over these
// rows: later passes find them in cache), each tile prefetches four tiles ahead.
template <int A, int B>
void rows_bf16(const float* x, const uint16_t* w, int64_t cols, int64_t r0, int64_t nr, float* y,
               int64_t ldy, bool fetch) {
  for (int64_t j0 = 0; j0 < nr; j0 += B) {
    const int64_t n = nr - j0 < B ? nr - j0 : B;
    const uint16_t* row[B];
    for (int64_t b = 0; b < B; ++b) row[b] = w + (r0 + j0 + (b < n ? b : 0)) * cols;
    tile_bf16<A, B>(x, cols, row, n, cols, y + r0 + j0, ldy, fetch ? 4 * B * cols : 0);
  }
}

// A lone token against rows [r0, r0+nr), each row read to its end before the next: the
// weights then form one sequential stream, which the hardware prefetcher follows at the read
// probe's rate. Interleaving eight rows (tile_bf16<1, 8>) shows it eight short streams 2 KB
// apart, which it barely follows even with the software prefetch. Microbenchmark, 200 MB of
// 1024 x 1024 rows, one thread: 28-31 GB/s one row at a time (probe 28-30), 18-21 interleaved;
// at 512 columns 28-33 against 20-21. Each output is still one FMA chain over its columns in
// order (the canonical order); the chains of neighbouring rows overlap out of order.
void lone_rows_bf16(const float* x, const uint16_t* w, int64_t cols, int64_t r0, int64_t nr,
                    float* y) {
  constexpr int B = 8;  // rows reduced together (store_tile's transposed sums)
  for (int64_t j0 = 0; j0 < nr; j0 += B) {
    const int64_t n = nr - j0 < B ? nr - j0 : B;
    const uint16_t* rows = w + (r0 + j0) * cols;
    __m512 acc[1][B];
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) {
      __m512 a = _mm512_setzero_ps();
      if (b < n)
        for (int64_t i = 0; i < cols; i += kLanes)
          a = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load_bf16(rows + b * cols + i), a);
      acc[0][b] = a;
    }
    store_tile<1, B>(acc, n, y + r0 + j0, 0);
  }
}

// Rows this long or shorter take lone_rows_bf16 for a lone token; longer ones (K3-small's
// 3072-column down projection) measured no better that way and keep the prefetching tiles.
constexpr int64_t kLoneRowsMaxCols = 2048;

// Any T: 6-token x 4-row tiles (24 of the 32 zmm registers accumulate: 6 FMAs per widened
// weight vector; 4x4 tiles measured 5-10% slower, one thread, T = 512), then a 4-token and a
// 2-token pass and a lone token (one row at a time, or 8-row tiles on long rows).
void gemv_bf16(const float* x, int64_t T, const uint16_t* w, int64_t cols, int64_t r0, int64_t nr,
               float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 6 <= T; t += 6)
    rows_bf16<6, 4>(x + t * cols, w, cols, r0, nr, y + t * ldy, ldy, t == 0);
  if (T - t >= 4) {
    rows_bf16<4, 4>(x + t * cols, w, cols, r0, nr, y + t * ldy, ldy, t == 0);
    t += 4;
  }
  if (T - t >= 2) {
    rows_bf16<2, 4>(x + t * cols, w, cols, r0, nr, y + t * ldy, ldy, t == 0);
    t += 2;
  }
  if (T - t != 1) return;
  if (t == 0 && cols <= kLoneRowsMaxCols) {
    lone_rows_bf16(x, w, cols, r0, nr, y);
    return;
  }
  rows_bf16<1, 8>(x + t * cols, w, cols, r0, nr, y + t * ldy, ldy, t == 0);
}

// y[a, b] for an A-token x R-row tile read straight from MXFP4 weights, in the pair order:
// each group of the R rows is decoded once (PairDecoder) and used by all A tokens, whose inputs
// are paired per group in registers (x_odd·v_odd after x_even·v_even, as mxfp4_decode_pairs'
// rows in the block product). p[b] and sc[b] for b >= nb repeat a valid row (computed, not
// stored). The scales are widened 16 groups at a time into a small table, so each group's
// scale is a broadcast from memory, not scalar work and a register broadcast.
template <int A, int R>
void tile_mxfp4(const float* x, int64_t cols, const uint8_t* const* p, const uint8_t* const* sc,
                int64_t nb, float* y, int64_t ldy) {
  constexpr int kWindow = 16;  // groups per widened scale window
  const PairDecoder decode;
  const PairColumns pair;
  __m512 acc[A][R];
#pragma GCC unroll 8
  for (int a = 0; a < A; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < R; ++b) acc[a][b] = _mm512_setzero_ps();
  const int64_t groups = cols / 32;
  alignas(64) float scale[R][kWindow];
  for (int64_t w0 = 0; w0 < groups; w0 += kWindow) {
    const int64_t wn = groups - w0 < kWindow ? groups - w0 : kWindow;
#pragma GCC unroll 8
    for (int b = 0; b < R; ++b) _mm512_store_ps(scale[b], e8m0x16(sc[b] + w0, wn));
    for (int64_t k = 0; k < wn; ++k) {
      const int64_t g = w0 + k;
      __m512 xe[A], xo[A];
#pragma GCC unroll 8
      for (int a = 0; a < A; ++a) pair(x + a * cols + g * 32, xe[a], xo[a]);
#pragma GCC unroll 8
      for (int b = 0; b < R; ++b) {
        __m512 even, odd;
        decode(p[b] + g * 16, scale[b][k], even, odd);
#pragma GCC unroll 8
        for (int a = 0; a < A; ++a)
          acc[a][b] = _mm512_fmadd_ps(xo[a], odd, _mm512_fmadd_ps(xe[a], even, acc[a][b]));
      }
    }
  }
  store_tile<A, R>(acc, nb, y, ldy);
}

// A tokens (1 to 4) against rows [r0, r0+nr) of MXFP4 weights, R rows at a time.
template <int A, int R>
void rows_mxfp4(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t cols,
                int64_t r0, int64_t nr, float* y, int64_t ldy, bool fetch) {
  constexpr int64_t kTilesAhead = 4;  // as the BF16 tiles: the tile four tiles on, into L2
  const int64_t pb = cols / 2, sb = cols / 32;
  for (int64_t j0 = 0; j0 < nr; j0 += R) {
    const int64_t n = nr - j0 < R ? nr - j0 : R;
    const uint8_t *p[R], *sc[R];
    for (int b = 0; b < R; ++b) {
      const int64_t r = r0 + j0 + (b < n ? b : n - 1);
      p[b] = packed + r * pb;
      sc[b] = scales + r * sb;
    }
    if (fetch) {
      prefetch_lines(packed + (r0 + j0 + kTilesAhead * R) * pb, R * pb);
      prefetch_lines(scales + (r0 + j0 + kTilesAhead * R) * sb, R * sb);
    }
    tile_mxfp4<A, R>(x, cols, p, sc, n, y + r0 + j0, ldy);
  }
}

// MXFP4 weights straight from storage (small T: each group is decoded once per four tokens,
// not stored): a lone token over 8-row tiles (the pairing of its inputs shared by more rows),
// more tokens over 4-row tiles, four tokens at a time.
void gemv_mxfp4(const float* x, int64_t T, const uint8_t* packed, const uint8_t* scales,
                int64_t cols, int64_t r0, int64_t nr, float* y, int64_t ldy) {
  const bool sweep = T <= 2;  // a weight sweep (larger T reuses each block across its tokens)
  int64_t t = 0;
  for (; t + 4 <= T; t += 4)
    rows_mxfp4<4, 4>(x + t * cols, packed, scales, cols, r0, nr, y + t * ldy, ldy, false);
  switch (T - t) {
    case 3:
      rows_mxfp4<3, 4>(x + t * cols, packed, scales, cols, r0, nr, y + t * ldy, ldy, false);
      break;
    case 2:
      rows_mxfp4<2, 4>(x + t * cols, packed, scales, cols, r0, nr, y + t * ldy, ldy, sweep);
      break;
    case 1:
      rows_mxfp4<1, 8>(x + t * cols, packed, scales, cols, r0, nr, y + t * ldy, ldy, sweep);
      break;
    default:
      break;
  }
}

// y[a, b] for an A-token x B-row tile of decoded fp32 rows (row b at w + b * cols; rows b >= nb
// repeat row 0, computed, not stored): each weight and input vector loaded once per 16 columns.
template <int A, int B>
void tile_f32(const float* x, int64_t ldx, const float* w, int64_t nb, int64_t cols, float* y,
              int64_t ldy) {
  __m512 acc[A][B];
#pragma GCC unroll 8
  for (int a = 0; a < A; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) acc[a][b] = _mm512_setzero_ps();
  for (int64_t i = 0; i < cols; i += kLanes) {
    __m512 wv[B];
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) wv[b] = _mm512_loadu_ps(w + (b < nb ? b : 0) * cols + i);
#pragma GCC unroll 8
    for (int a = 0; a < A; ++a) {
      const __m512 xv = _mm512_loadu_ps(x + a * ldx + i);
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[a][b] = _mm512_fmadd_ps(xv, wv[b], acc[a][b]);
    }
  }
  store_tile<A, B>(acc, nb, y, ldy);
}

// A tokens against the nr decoded rows, four rows at a time.
template <int A>
void rows_f32(const float* x, const float* rows, int64_t nr, int64_t cols, float* y, int64_t ldy) {
  for (int64_t j = 0; j < nr; j += 4)
    tile_f32<A, 4>(x, cols, rows + j * cols, nr - j < 4 ? nr - j : 4, cols, y + j, ldy);
}

// All T tokens against a block of decoded rows: 6-token tiles, then a 4-token one and the last
// 1-3 tokens (as gemv_bf16; every output is the same chain whatever tile computes it).
void block_product(const float* x, int64_t T, const float* rows, int64_t nr, int64_t cols,
                   int64_t ldy, int64_t r0, float* y) {
  int64_t t = 0;
  for (; t + 6 <= T; t += 6) rows_f32<6>(x + t * cols, rows, nr, cols, y + t * ldy + r0, ldy);
  if (T - t >= 4) {
    rows_f32<4>(x + t * cols, rows, nr, cols, y + t * ldy + r0, ldy);
    t += 4;
  }
  switch (T - t) {
    case 3:
      rows_f32<3>(x + t * cols, rows, nr, cols, y + t * ldy + r0, ldy);
      break;
    case 2:
      rows_f32<2>(x + t * cols, rows, nr, cols, y + t * ldy + r0, ldy);
      break;
    case 1:
      rows_f32<1>(x + t * cols, rows, nr, cols, y + t * ldy + r0, ldy);
      break;
    default:
      break;
  }
}

}  // namespace

// Direct MXFP4 up to T = 7: from T = 8 decoding the rows once and running fp32 tiles is faster
// (128x128, one thread: 2.4 vs 5.5 us at T = 3, 6.2 vs 6.7 at T = 7, 6.6 vs 6.1 at T = 8).
const LinearKernels kLinearKernels = {.isa = "avx512",
                                      .lanes = kLanes,
                                      .mxfp4_direct_max_t = 7,
                                      .widen_bf16 = widen_bf16,
                                      .mxfp4_decode = mxfp4_decode,
                                      .mxfp4_decode_pairs = mxfp4_decode_pairs,
                                      .pair_columns = pair_columns,
                                      .gemv_bf16 = gemv_bf16,
                                      .gemv_mxfp4 = gemv_mxfp4,
                                      .block_product = block_product};

}  // namespace k3::avx512
