// The q8 precision's MXFP4 x int8 GEMV for AVX-512 with AVX512_VNNI (core/precision.h): per
// group of 4 blocks (128 weights, one 64-byte line of nibbles) the nibbles become unsigned
// bytes 2 * E2M1 + 12 by one vpshufb each (low, high), and two vpdpbusd take their dots with
// the int8 activations; a window's 16 block sums are gathered by a 4x4 transpose-add and
// scaled in fp32. Layout, lane order and summation order: linear_kernels.h (LinearQ8Kernels);
// the result is bit-identical to linear_q8.cpp's scalar kernel and to the AVX2 one. Built with
// the AVX-512 flags plus -mavx512vnni (CMakeLists.txt: files named *_avx512vnni.cpp); taken
// only where cpu_features().avx512_vnni.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ops/linear/linear_kernels.h"

// GCC 12 flags its own AVX-512 intrinsics (an undefined-vector idiom) as uninitialised.
#if !defined(__clang__)  // clang does not know the second one
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace k3::avx512vnni {
namespace {

constexpr int kTile = 4;             // tokens per pass over a weight row
constexpr int64_t kChunk = 16;       // tokens whose activations stay in L2 over a task's rows
constexpr int64_t kWinPacked = 256;  // packed bytes of a window (16 blocks x 16)

// 2 * E2M1 + 12 for nibbles 0..15 (sign bit 3): 0..24, unsigned for vpdpbusd.
inline __m512i nibble_lut() {
  return _mm512_broadcast_i32x4(
      _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
}

// The window's 16 E8M0 scale bytes as fp32 2^(e - 127), in lane order (lane 4b + g holds block
// 4g + b): e << 23 is the float's bits for e >= 1 (255 gives +inf), e = 0 is 2^-127.
inline __m512 window_scales(const uint8_t* s) {
  const __m128i perm = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i b = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)), perm);
  const __m512i e = _mm512_slli_epi32(_mm512_cvtepu8_epi32(b), 23);
  return _mm512_castsi512_ps(_mm512_max_epi32(e, _mm512_set1_epi32(0x00400000)));
}

// Lane 4b + g of the result = the sum of the four int32 lanes of 128-bit lane b of a[g].
inline __m512i transpose_add(const __m512i* a) {
  const __m512i s01 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
  const __m512i s23 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

// (acc[0..8) + acc[8..16)), then halves again: the fixed tree of linear_kernels.h.
inline float reduce16(__m512 acc) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// One window of one weight row (pw: 256 packed bytes, sw: 16 scale bytes) into NT tokens'
// accumulators; xw[t] is token t's window of activations (kQ8WinBytes).
template <int NT>
inline void window(const uint8_t* pw, const uint8_t* sw, const uint8_t* const* xw, __m512* acc) {
  const __m512i lut = nibble_lut(), m0f = _mm512_set1_epi8(0x0f);
  const __m512 ws = window_scales(sw);
  __m512i isum[NT][4];
  for (int g = 0; g < 4; ++g) {
    const __m512i p = _mm512_loadu_si512(reinterpret_cast<const void*>(pw + 64 * g));
    const __m512i lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(p, m0f));
    const __m512i hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(p, 4), m0f));
    for (int t = 0; t < NT; ++t) {
      const uint8_t* a = xw[t] + 128 * g;
      const __m512i even = _mm512_loadu_si512(reinterpret_cast<const void*>(a));
      const __m512i odd = _mm512_loadu_si512(reinterpret_cast<const void*>(a + 64));
      isum[t][g] =
          _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, even), hi, odd);
    }
  }
  for (int t = 0; t < NT; ++t) {
    const __m512i corr = _mm512_loadu_si512(reinterpret_cast<const void*>(xw[t] + 512));
    const __m512 dh = _mm512_loadu_ps(reinterpret_cast<const float*>(xw[t] + 576));
    const __m512i v = _mm512_sub_epi32(transpose_add(isum[t]), corr);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(ws, dh), acc[t]);
  }
}

// y[t * ldy] for NT tokens (x: the first token's quantised row, rb bytes apart) from one row.
template <int NT>
void row_tile(const uint8_t* x, int64_t rb, const uint8_t* prow, const uint8_t* srow, int64_t nb,
              float* y, int64_t ldy) {
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const uint8_t* xw[NT];
  const int64_t n_win = (nb + kQ8WinBlocks - 1) / kQ8WinBlocks;
  for (int64_t w = 0; w < n_win; ++w) {
    for (int t = 0; t < NT; ++t) xw[t] = x + t * rb + w * kQ8WinBytes;
    const int64_t left = nb - w * kQ8WinBlocks;
    if (left >= kQ8WinBlocks) {
      // Into L2, 16 windows (4 KB) ahead: 22.5-24.1 GB/s streamed on one thread against
      // 20.0-22.5 at 1 KB ahead and 21.6 with none (bench/q8_micro.cpp, a noisy machine:
      // about the noise). Past the end of the weights is harmless.
      _mm_prefetch(reinterpret_cast<const char*>(prow + (w + 16) * kWinPacked), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(prow + (w + 16) * kWinPacked + 128), _MM_HINT_T1);
      window<NT>(prow + w * kWinPacked, srow + w * kQ8WinBlocks, xw, acc);
      continue;
    }
    // The last, partial window: zero nibbles and scale bytes beyond the row (their activations
    // are zero too), so nothing past the weights is read.
    alignas(64) uint8_t pbuf[kWinPacked] = {};
    alignas(16) uint8_t sbuf[kQ8WinBlocks] = {};
    std::memcpy(pbuf, prow + w * kWinPacked, static_cast<size_t>(left) * 16);
    std::memcpy(sbuf, srow + w * kQ8WinBlocks, static_cast<size_t>(left));
    window<NT>(pbuf, sbuf, xw, acc);
  }
  for (int t = 0; t < NT; ++t) y[t * ldy] = reduce16(acc[t]);
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
        switch (c1 - t < kTile ? c1 - t : kTile) {
          case 1:
            row_tile<1>(x, rb, prow, srow, nb, yt, ldy);
            break;
          case 2:
            row_tile<2>(x, rb, prow, srow, nb, yt, ldy);
            break;
          case 3:
            row_tile<3>(x, rb, prow, srow, nb, yt, ldy);
            break;
          default:
            row_tile<4>(x, rb, prow, srow, nb, yt, ldy);
            break;
        }
      }
    }
  }
}

}  // namespace

const LinearQ8Kernels kLinearQ8Kernels = {.gemv = gemv};

}  // namespace k3::avx512vnni
