// linear kernels of the bf16 precision (core/precision.h) for AVX-512 with AVX512_BF16: bf16
// activations times bf16 weights (BF16 storage, or MXFP4 decoded to bf16 exactly) with
// vdpbf16ps, fp32 accumulation. Built with the AVX-512 flags plus -mavx512bf16 (CMakeLists.txt:
// files named *_avx512bf16.cpp); runs only when core/precision.h's bf16_dot_native() holds.
// Summation order: linear_kernels.h (LinearBf16Kernels).
//
// vdpbf16ps adds a lane's two products to its fp32 accumulator with round to nearest even, and
// treats subnormal inputs (below 1.2e-38) as zero and flushes a subnormal result to zero, by
// definition (it does not read MXCSR): the fallback kernels keep those tiny values. Products of
// two bf16 values are exact in fp32.
#include <immintrin.h>

#include <cstdint>

#include "ops/linear/avx512_tile.h"
#include "ops/linear/linear_kernels.h"
#include "ops/linear/prefetch.h"

// GCC 12 flags its own AVX-512 intrinsics (an undefined-vector idiom) as uninitialised.
#if !defined(__clang__)  // clang does not know the second one
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace k3::avx512bf16 {
namespace {

constexpr int64_t kCols = 32;  // bf16 values per vector: one chunk, one 64-byte cache line

inline __m512i load32(const uint16_t* p) {
  return _mm512_loadu_si512(reinterpret_cast<const void*>(p));
}

// acc[i] += x[2i]·w[2i] + x[2i+1]·w[2i+1] (both vectors hold 32 bf16 in column order).
inline __m512 dot(__m512 acc, __m512i x, __m512i w) {
  return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w);
}

// 16 fp32 -> 16 bf16, round to nearest even, NaN kept (quiet bit set): f32_to_bf16 exactly.
inline __m256i round16(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, q));
}

void round_bf16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_loadu_si512(reinterpret_cast<const void*>(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), round16(u));
  }
  if (i < n) {  // the tail, masked
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i u = _mm512_maskz_loadu_epi32(m, x + i);
    _mm256_mask_storeu_epi16(out + i, m, round16(u));
  }
}

inline __m512 widen16(__m256i b) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
}

// x = hi + mid + lo, each rounded to nearest even from what the parts before left.
void split3_bf16(const float* x, int64_t n, uint16_t* hi, uint16_t* mid, uint16_t* lo) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m256i h = round16(_mm512_castps_si512(v));
    const __m512 r1 = _mm512_sub_ps(v, widen16(h));
    const __m256i d = round16(_mm512_castps_si512(r1));
    const __m256i l = round16(_mm512_castps_si512(_mm512_sub_ps(r1, widen16(d))));
    _mm256_mask_storeu_epi16(hi + i, m, h);
    _mm256_mask_storeu_epi16(mid + i, m, d);
    _mm256_mask_storeu_epi16(lo + i, m, l);
  }
}

// E8M0 scale 2^(s-127) (0: the subnormal 2^-127; 255: infinity, as the scalar path).
inline float e8m0(uint8_t s) {
  const uint32_t bits = s == 0 ? 0x00400000u : s == 255 ? 0x7f800000u : uint32_t{s} << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// One MXFP4 group (16 bytes, 32 values) as 32 bf16 in element order. The signed E2M1 table is
// scaled in fp32 (exact: a power of two) and narrowed by taking the top halves (exact: every
// value has at most two significant bits, subnormal ones included); byte j's low nibble is
// element 2j and its high nibble element 2j+1, so the index of dword j is lo | hi << 16 and
// one vpermw looks up all 32.
struct GroupDecoder {
  __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f,
                                -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
  __m512i low4 = _mm512_set1_epi32(0x0f);

  __m512i operator()(const uint8_t* bytes16, uint8_t scale) const {
    const __m512 scaled = _mm512_mul_ps(table, _mm512_set1_ps(e8m0(scale)));
    const __m512i words = _mm512_castsi256_si512(
        _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(scaled), 16)));
    const __m512i b =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16)));
    const __m512i idx =
        _mm512_or_si512(_mm512_and_si512(b, low4), _mm512_slli_epi32(_mm512_srli_epi32(b, 4), 16));
    return _mm512_permutexvar_epi16(idx, words);  // indices < 16: the upper half is never read
  }
};

void mxfp4_decode_strided(const uint8_t* packed, const uint8_t* scales, int64_t cols, uint16_t* out,
                          int64_t group_stride) {
  const GroupDecoder decode;
  for (int64_t g = 0; g < cols / kCols; ++g)
    _mm512_storeu_si512(reinterpret_cast<void*>(out + g * group_stride),
                        decode(packed + g * 16, scales[g]));
}

void mxfp4_decode(const uint8_t* packed, const uint8_t* scales, int64_t cols, uint16_t* out) {
  mxfp4_decode_strided(packed, scales, cols, out, kCols);
}

// As the fp32 tiles (linear_avx512.cpp): a weight sweep asks for the rows' lines four tiles
// ahead into L2 (ops/linear/prefetch.h). One chunk is one line here.

// y[a, b] for an A-token x B-row tile of BF16 rows: A*B accumulators, each weight and input
// vector loaded once per 32 columns. row[b] for b >= nb repeats a valid row (computed, not
// stored). x [A, ldx] bf16.
template <int A, int B>
void tile_bf16(const uint16_t* x, int64_t ldx, const uint16_t* const* row, int64_t nb, int64_t cols,
               float* y, int64_t ldy, int64_t prefetch_ahead) {
  __m512 acc[A][B];
#pragma GCC unroll 8
  for (int a = 0; a < A; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) acc[a][b] = _mm512_setzero_ps();
  for (int64_t i = 0; i < cols; i += kCols) {
    if (prefetch_ahead > 0) prefetch_rows<B>(row, i + prefetch_ahead);
    if constexpr (A == 1) {  // each weight vector used once: no array of them (no spills)
      const __m512i xv = load32(x + i);
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[0][b] = dot(acc[0][b], xv, load32(row[b] + i));
      continue;
    }
    __m512i wv[B];
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) wv[b] = load32(row[b] + i);
#pragma GCC unroll 8
    for (int a = 0; a < A; ++a) {
      const __m512i xv = load32(x + a * ldx + i);
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[a][b] = dot(acc[a][b], xv, wv[b]);
    }
  }
  store_tile<A, B>(acc, nb, y, ldy);
}

// A tokens against rows [r0, r0+nr), B rows at a time; `fetch`: the first pass over the rows.
template <int A, int B>
void rows_bf16(const uint16_t* x, const uint16_t* w, int64_t cols, int64_t r0, int64_t nr, float* y,
               int64_t ldy, bool fetch) {
  for (int64_t j0 = 0; j0 < nr; j0 += B) {
    const int64_t n = nr - j0 < B ? nr - j0 : B;
    const uint16_t* row[B];
    for (int64_t b = 0; b < B; ++b) row[b] = w + (r0 + j0 + (b < n ? b : 0)) * cols;
    tile_bf16<A, B>(x, cols, row, n, cols, y + r0 + j0, ldy, fetch ? 4 * B * cols : 0);
  }
}

// A lone token against rows [r0, r0+nr), each row read to its end before the next: one
// sequential stream for the hardware prefetcher, as linear_avx512.cpp's lone_rows_bf16 (which
// says why); each output still one accumulator over its chunks in order.
void lone_rows_bf16(const uint16_t* x, const uint16_t* w, int64_t cols, int64_t r0, int64_t nr,
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
        for (int64_t i = 0; i < cols; i += kCols)
          a = dot(a, load32(x + i), load32(rows + b * cols + i));
      acc[0][b] = a;
    }
    store_tile<1, B>(acc, n, y + r0 + j0, 0);
  }
}

// Rows this long or shorter take lone_rows_bf16 for a lone token (as in linear_avx512.cpp).
constexpr int64_t kLoneRowsMaxCols = 2048;

// Any T: 4-token x 4-row tiles, then a 2-token pass and a lone token (one row at a time, or
// over 8-row tiles on long rows). (6 x 4 tiles, 10 loads per 24 vdpbf16ps against 8 per 16,
// measured the same on K3-small's prefill.)
void gemv_bf16(const uint16_t* x, int64_t T, const uint16_t* w, int64_t cols, int64_t r0,
               int64_t nr, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 4 <= T; t += 4)
    rows_bf16<4, 4>(x + t * cols, w, cols, r0, nr, y + t * ldy, ldy, t == 0);
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

// y[a, b] for an A-token x 4-row tile straight from MXFP4 weights: each group of the four rows
// decoded once and used by all A tokens. p[b], sc[b] for b >= nb repeat a valid row.
template <int A>
void tile_mxfp4(const GroupDecoder& decode, const uint16_t* x, int64_t cols,
                const uint8_t* const* p, const uint8_t* const* sc, int64_t nb, float* y,
                int64_t ldy) {
  constexpr int kRows = 4;
  __m512 acc[A][kRows];
#pragma GCC unroll 4
  for (int a = 0; a < A; ++a)
#pragma GCC unroll 4
    for (int b = 0; b < kRows; ++b) acc[a][b] = _mm512_setzero_ps();
  for (int64_t g = 0; g < cols / kCols; ++g) {
    __m512i v[kRows];
#pragma GCC unroll 4
    for (int b = 0; b < kRows; ++b) v[b] = decode(p[b] + g * 16, sc[b][g]);
#pragma GCC unroll 4
    for (int a = 0; a < A; ++a) {
      const __m512i xv = load32(x + a * cols + g * kCols);
#pragma GCC unroll 4
      for (int b = 0; b < kRows; ++b) acc[a][b] = dot(acc[a][b], xv, v[b]);
    }
  }
  store_tile<A, kRows>(acc, nb, y, ldy);
}

void gemv_mxfp4(const uint16_t* x, int64_t T, const uint8_t* packed, const uint8_t* scales,
                int64_t cols, int64_t r0, int64_t nr, float* y, int64_t ldy) {
  constexpr int kRows = 4;
  constexpr int64_t kBlocksAhead = 4;
  const GroupDecoder decode;
  const int64_t pb = cols / 2, sb = cols / 32;
  for (int64_t j0 = 0; j0 < nr; j0 += kRows) {
    const int64_t n = nr - j0 < kRows ? nr - j0 : kRows;
    const uint8_t *p[kRows], *sc[kRows];
    for (int b = 0; b < kRows; ++b) {
      const int64_t r = r0 + j0 + (b < n ? b : n - 1);
      p[b] = packed + r * pb;
      sc[b] = scales + r * sb;
    }
    if (T <= 2) {  // a weight sweep (larger T reuses each block across its tokens)
      prefetch_lines(packed + (r0 + j0 + kBlocksAhead * kRows) * pb, kRows * pb);
      prefetch_lines(scales + (r0 + j0 + kBlocksAhead * kRows) * sb, kRows * sb);
    }
    float* yj = y + r0 + j0;
    int64_t t = 0;
    for (; t + 4 <= T; t += 4)
      tile_mxfp4<4>(decode, x + t * cols, cols, p, sc, n, yj + t * ldy, ldy);
    switch (T - t) {
      case 3:
        tile_mxfp4<3>(decode, x + t * cols, cols, p, sc, n, yj + t * ldy, ldy);
        break;
      case 2:
        tile_mxfp4<2>(decode, x + t * cols, cols, p, sc, n, yj + t * ldy, ldy);
        break;
      case 1:
        tile_mxfp4<1>(decode, x + t * cols, cols, p, sc, n, yj + t * ldy, ldy);
        break;
      default:
        break;
    }
  }
}

}  // namespace

const LinearBf16Kernels kLinearBf16Kernels = {.lanes = kCols,
                                              .mxfp4_direct_max_t = 7,
                                              .round_bf16 = round_bf16,
                                              .split3_bf16 = split3_bf16,
                                              .mxfp4_decode = mxfp4_decode,
                                              .mxfp4_decode_strided = mxfp4_decode_strided,
                                              .gemv_bf16 = gemv_bf16,
                                              .gemv_mxfp4 = gemv_mxfp4};

}  // namespace k3::avx512bf16
