// The q8 precision's MXFP4 x int8 GEMV for AVX2 (core/precision.h): per two blocks (32 packed
// bytes) the nibbles become unsigned bytes 2 * E2M1 + 12 by one vpshufb each (low, high),
// vpmaddubsw multiplies them with the int8 activations into int16 pairs (at most 2 * 24 * 127
// each, two summed: no saturation) and vpmaddwd by ones sums those into int32. A window's 16
// block sums are gathered by 4x4 transpose-adds, two 8-lane halves, and scaled in fp32: the
// same lanes and summation order as the AVX-512 VNNI kernel and linear_q8.cpp's scalar one
// (linear_kernels.h, LinearQ8Kernels), so the three agree bit for bit.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ops/linear/linear_kernels.h"

namespace k3::avx2 {
namespace {

constexpr int kTile = 2;             // tokens per pass over a weight row (16 ymm registers)
constexpr int64_t kChunk = 16;       // tokens whose activations stay in L2 over a task's rows
constexpr int64_t kWinPacked = 256;  // packed bytes of a window (16 blocks x 16)

inline __m256i nibble_lut() {  // 2 * E2M1 + 12 for nibbles 0..15, in both 128-bit lanes
  return _mm256_broadcastsi128_si256(
      _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
}

// e << 23 as a float is 2^(e - 127) for e >= 1 (255: +inf); e = 0 is 2^-127.
inline __m256 e8m0(__m128i bytes8) {
  const __m256i e = _mm256_slli_epi32(_mm256_cvtepu8_epi32(bytes8), 23);
  return _mm256_castsi256_ps(_mm256_max_epi32(e, _mm256_set1_epi32(0x00400000)));
}

// Lane 4b + g of the result = the sum of the four int32 lanes of 128-bit lane b of a[g].
inline __m256i transpose_add(const __m256i* a) {
  const __m256i s01 =
      _mm256_add_epi32(_mm256_unpacklo_epi32(a[0], a[1]), _mm256_unpackhi_epi32(a[0], a[1]));
  const __m256i s23 =
      _mm256_add_epi32(_mm256_unpacklo_epi32(a[2], a[3]), _mm256_unpackhi_epi32(a[2], a[3]));
  return _mm256_add_epi32(_mm256_unpacklo_epi64(s01, s23), _mm256_unpackhi_epi64(s01, s23));
}

inline float reduce16(__m256 lanes0_8, __m256 lanes8_16) {
  const __m256 s8 = _mm256_add_ps(lanes0_8, lanes8_16);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// Half h (lanes 8h .. 8h+8: blocks 4g + 2h + b, b < 2) of one window of one weight row into
// NT tokens' accumulators acc[t][h].
template <int NT>
inline void half_window(const uint8_t* pw, __m256 ws, const uint8_t* const* xw, int h,
                        __m256 (*acc)[2]) {
  const __m256i lut = nibble_lut(), m0f = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  __m256i isum[NT][4];
  for (int g = 0; g < 4; ++g) {
    const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pw + 64 * g + 32 * h));
    const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(p, m0f));
    const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(p, 4), m0f));
    for (int t = 0; t < NT; ++t) {
      const uint8_t* a = xw[t] + 128 * g + 32 * h;
      const __m256i even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
      const __m256i odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 64));
      const __m256i pairs =
          _mm256_add_epi16(_mm256_maddubs_epi16(lo, even), _mm256_maddubs_epi16(hi, odd));
      isum[t][g] = _mm256_madd_epi16(pairs, ones);
    }
  }
  for (int t = 0; t < NT; ++t) {
    const __m256i corr = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xw[t] + 512 + 32 * h));
    const __m256 dh = _mm256_loadu_ps(reinterpret_cast<const float*>(xw[t] + 576 + 32 * h));
    const __m256i v = _mm256_sub_epi32(transpose_add(isum[t]), corr);
    acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(ws, dh), acc[t][h]);
  }
}

template <int NT>
inline void window(const uint8_t* pw, const uint8_t* sw, const uint8_t* const* xw,
                   __m256 (*acc)[2]) {
  const __m128i perm = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i b = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sw)), perm);
  half_window<NT>(pw, e8m0(b), xw, 0, acc);
  half_window<NT>(pw, e8m0(_mm_srli_si128(b, 8)), xw, 1, acc);
}

// y[t * ldy] for NT tokens (x: the first token's quantised row, rb bytes apart) from one row.
template <int NT>
void row_tile(const uint8_t* x, int64_t rb, const uint8_t* prow, const uint8_t* srow, int64_t nb,
              float* y, int64_t ldy) {
  __m256 acc[NT][2];
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const uint8_t* xw[NT];
  const int64_t n_win = (nb + kQ8WinBlocks - 1) / kQ8WinBlocks;
  for (int64_t w = 0; w < n_win; ++w) {
    for (int t = 0; t < NT; ++t) xw[t] = x + t * rb + w * kQ8WinBytes;
    const int64_t left = nb - w * kQ8WinBlocks;
    if (left >= kQ8WinBlocks) {
      // Into L2, 16 windows (4 KB) ahead, as the AVX-512 kernel (here 1 KB and 4 KB measured
      // the same within the noise, 15-20 GB/s; bench/q8_micro.cpp). Past the end is harmless.
      _mm_prefetch(reinterpret_cast<const char*>(prow + (w + 16) * kWinPacked), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(prow + (w + 16) * kWinPacked + 128), _MM_HINT_T1);
      window<NT>(prow + w * kWinPacked, srow + w * kQ8WinBlocks, xw, acc);
      continue;
    }
    // The last, partial window: zero nibbles and scale bytes beyond the row (their activations
    // are zero too), so nothing past the weights is read.
    alignas(32) uint8_t pbuf[kWinPacked] = {};
    alignas(16) uint8_t sbuf[kQ8WinBlocks] = {};
    std::memcpy(pbuf, prow + w * kWinPacked, static_cast<size_t>(left) * 16);
    std::memcpy(sbuf, srow + w * kQ8WinBlocks, static_cast<size_t>(left));
    window<NT>(pbuf, sbuf, xw, acc);
  }
  for (int t = 0; t < NT; ++t) y[t * ldy] = reduce16(acc[t][0], acc[t][1]);
}

void gemv(const uint8_t* xq, int64_t T, const uint8_t* packed, const uint8_t* scales, int64_t cols,
          int64_t r0, int64_t nr, float* y, int64_t ldy) {
  const int64_t nb = cols / 32;
  const int64_t rb = (nb + kQ8WinBlocks - 1) / kQ8WinBlocks * kQ8WinBytes;
  for (int64_t c0 = 0; c0 < T; c0 += kChunk) {
    const int64_t c1 = T < c0 + kChunk ? T : c0 + kChunk;
    for (int64_t r = r0; r < r0 + nr; ++r) {
      const uint8_t* prow = packed + r * (cols / 2);
      const uint8_t* srow = scales + r * nb;
      for (int64_t t = c0; t < c1; t += kTile) {
        const uint8_t* x = xq + t * rb;
        float* yt = y + t * ldy + r;
        if (c1 - t >= kTile) {
          row_tile<2>(x, rb, prow, srow, nb, yt, ldy);
        } else {
          row_tile<1>(x, rb, prow, srow, nb, yt, ldy);
        }
      }
    }
  }
}

}  // namespace

const LinearQ8Kernels kLinearQ8Kernels = {.gemv = gemv};

}  // namespace k3::avx2
