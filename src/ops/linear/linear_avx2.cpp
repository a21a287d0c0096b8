// linear / MXFP4 kernels for AVX2 + FMA (+F16C), 8 lanes. Built with -mavx2 -mfma -mf16c
// (CMakeLists.txt: files named *_avx2.cpp); runs only when cpu_isa picks avx2.
#include <immintrin.h>

#include <cstdint>

#include "ops/linear/linear_kernels.h"
#include "ops/linear/prefetch.h"

namespace k3::avx2 {
namespace {

constexpr int64_t kLanes = 8;

// The canonical reduction: (lanes 0-3 + lanes 4-7), then pairs, then the last two.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// hsum of 8 accumulators at once, transposed: the same pairings at every level (i + (i + 4),
// then + 2, + 1; float addition commutes), so each result is bit-identical to hsum(v[b]).
inline void hsum8(const __m256 v[8], float out[8]) {
  __m256 s[4];
  for (int p = 0; p < 4; ++p)  // [v2p, v2p+1]: lanes i + (i + 4)
    s[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31));
  __m256 u[2];
  for (int p = 0; p < 2; ++p)  // 128-bit lane h: rows 4p + h and 4p + h + 2, i + (i + 2)
    u[p] = _mm256_add_ps(_mm256_shuffle_ps(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // lane 0: rows 0, 2, 4, 6; lane 1: rows 1, 3, 5, 7.
  const __m256 f = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, f);
  for (int j = 0; j < 4; ++j) {
    out[2 * j] = lanes[j];
    out[2 * j + 1] = lanes[4 + j];
  }
}

inline __m256 load_bf16(const uint16_t* p) {  // 8 bf16 -> fp32 (exact: the top halves)
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}

// E8M0 scale 2^(s-127) as float bits; 0 is the subnormal 2^-127, 255 decodes as infinity
// (as the scalar path's ldexp does).
inline float e8m0(uint8_t s) {
  const uint32_t bits = s == 0 ? 0x00400000u : s == 255 ? 0x7f800000u : uint32_t{s} << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// One MXFP4 group (16 bytes, 32 values) as four vectors in element order. Each nibble's
// magnitude comes from an 8-entry table (scaled by the group's power of two, exact) through
// one permute; its sign bit is moved to the float sign.
struct GroupDecoder {
  __m256 lut = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  __m128i low4 = _mm_set1_epi8(0x0f);
  __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));

  void operator()(const uint8_t* bytes16, uint8_t scale, __m256 out[4]) const {
    const __m256 table = _mm256_mul_ps(lut, _mm256_set1_ps(e8m0(scale)));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16));
    const __m128i lo = _mm_and_si128(b, low4);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
    const __m128i codes[2] = {_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi)};  // 0-15, 16-31
    for (int h = 0; h < 2; ++h) {
      const __m256i c0 = _mm256_cvtepu8_epi32(codes[h]);
      const __m256i c1 = _mm256_cvtepu8_epi32(_mm_srli_si128(codes[h], 8));
      out[2 * h] = value(table, c0);
      out[2 * h + 1] = value(table, c1);
    }
  }
  __m256 value(__m256 table, __m256i code) const {
    const __m256 mag = _mm256_permutevar8x32_ps(table, code);  // uses code & 7
    const __m256i s = _mm256_and_si256(_mm256_slli_epi32(code, 28), sign);
    return _mm256_xor_ps(mag, _mm256_castsi256_ps(s));
  }
};

// The same values for a dot product, cheaper: one byte shuffle per 16 nibbles looks up twice
// each code's signed value, a small integer (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12), which is widened,
// converted and multiplied by half the group's power of two: code value × scale exactly, but
// +0 for code 8's -0. A sum cannot tell: its accumulator starts at +0 and never becomes -0, so
// adding either zero leaves it unchanged. (GroupDecoder keeps -0 for rows that are written out:
// re-encoding them must give the stored bytes back.) About a fifth faster in gemv_mxfp4.
struct DotGroupDecoder {
  __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  __m128i low4 = _mm_set1_epi8(0x0f);

  void operator()(const uint8_t* bytes16, uint8_t scale, __m256 out[4]) const {
    const __m256 half_scale = _mm256_set1_ps(e8m0(scale) * 0.5f);
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16));
    const __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(b, low4));
    const __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(b, 4), low4));
    const __m128i twice[2] = {_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi)};  // 0-15, 16-31
    for (int h = 0; h < 2; ++h) {
      out[2 * h] = value(twice[h], half_scale);
      out[2 * h + 1] = value(_mm_srli_si128(twice[h], 8), half_scale);
    }
  }
  static __m256 value(__m128i twice8, __m256 half_scale) {  // the low 8 int8s
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(twice8)), half_scale);
  }
};

void widen_bf16(const uint16_t* p, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm256_storeu_ps(out + i, load_bf16(p + i));
  for (; i < n; ++i) {
    const uint32_t u = uint32_t{p[i]} << 16;
    __builtin_memcpy(out + i, &u, 4);
  }
}

void mxfp4_decode(const uint8_t* packed, const uint8_t* scales, int64_t cols, float* out) {
  const GroupDecoder decode;
  for (int64_t g = 0; g < cols / 32; ++g) {
    __m256 v[4];
    decode(packed + g * 16, scales[g], v);
    for (int j = 0; j < 4; ++j) _mm256_storeu_ps(out + g * 32 + j * kLanes, v[j]);
  }
}

// A lone token's GEMV streams the weights once and is bound by memory latency as much as by
// bandwidth: a tile's rows are short streams (one row is a few KB) that the hardware
// prefetcher barely ramps up on, so the tile asks for the same lines four tiles ahead (the
// rows of consecutive tiles are consecutive in memory). Measured on K3-small decode at -t 1:
// +10% tokens/s. Prefetches past the end of the weights are harmless (they never fault).
// The helpers: ops/linear/prefetch.h.

inline __m256 load_row(const uint16_t* p) { return load_bf16(p); }     // BF16 storage
inline __m256 load_row(const float* p) { return _mm256_loadu_ps(p); }  // decoded rows

// y[a, b] for an A-token x B-row tile, from BF16 weights (widened in registers, exact) or from
// decoded fp32 rows: A*B accumulators, each weight and input vector loaded once per 8 columns.
// Every output is one 8-lane FMA chain over the columns in order, then hsum: the same bits
// whatever the tile's shape (hsum8 pairs the lanes as hsum does).
template <int A, int B, typename W>
void tile(const float* x, int64_t ldx, const W* const* row, int64_t cols, float* y, int64_t ldy,
          int64_t prefetch_ahead) {
  __m256 acc[A][B];
#pragma GCC unroll 8
  for (int a = 0; a < A; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) acc[a][b] = _mm256_setzero_ps();
  for (int64_t i = 0; i < cols; i += kLanes) {
    if constexpr (A == 1) {  // each weight vector used once: no array of them (no spills)
      const __m256 xv = _mm256_loadu_ps(x + i);
      if constexpr (sizeof(W) == 2) {  // streamed from storage; decoded rows are in cache
        if (i % kBf16PerLine == 0) prefetch_rows<B>(row, i + prefetch_ahead);
      }
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[0][b] = _mm256_fmadd_ps(xv, load_row(row[b] + i), acc[0][b]);
      continue;
    }
    __m256 wv[B];
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) wv[b] = load_row(row[b] + i);
#pragma GCC unroll 8
    for (int a = 0; a < A; ++a) {
      const __m256 xv = _mm256_loadu_ps(x + a * ldx + i);
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[a][b] = _mm256_fmadd_ps(xv, wv[b], acc[a][b]);
    }
  }
  if constexpr (B == 8) {
    for (int a = 0; a < A; ++a) hsum8(acc[a], y + a * ldy);
    return;
  }
  for (int a = 0; a < A; ++a)
    for (int b = 0; b < B; ++b) y[a * ldy + b] = hsum(acc[a][b]);
}

// The last n < B rows in one tile of exactly n (a tile of B would compute rows it drops).
template <int A, int N, typename W>
void tail_tile(const float* x, int64_t ldx, const W* const* row, int64_t n, int64_t cols, float* y,
               int64_t ldy, int64_t prefetch_ahead) {
  if constexpr (N >= 1) {
    if (n == N) return tile<A, N>(x, ldx, row, cols, y, ldy, prefetch_ahead);
    tail_tile<A, N - 1>(x, ldx, row, n, cols, y, ldy, prefetch_ahead);
  }
}

// A tokens (rows of x, ldx apart) against weight rows [0, nr) of w (cols apart), B at a time.
template <int A, int B, typename W>
void rows_tiled(const float* x, int64_t ldx, const W* w, int64_t nr, int64_t cols, float* y,
                int64_t ldy, int64_t prefetch_ahead) {
  const W* row[B];
  for (int64_t j0 = 0; j0 < nr; j0 += B) {
    const int64_t n = nr - j0 < B ? nr - j0 : B;
    for (int64_t b = 0; b < n; ++b) row[b] = w + (j0 + b) * cols;
    if (n == B) {
      tile<A, B>(x, ldx, row, cols, y + j0, ldy, prefetch_ahead);
    } else {
      tail_tile<A, B - 1>(x, ldx, row, n, cols, y + j0, ldy, prefetch_ahead);
    }
  }
}

// Any T against nr rows: 4-token x 3-row tiles, then a 2-token pass and a lone token over 8
// rows (more independent chains where there are fewer tokens to share each weight load). BF16
// rows stream from storage, so a tile asks for the lines four tiles ahead.
template <typename W>
void tokens_by_rows(const float* x, int64_t T, const W* w, int64_t nr, int64_t cols, float* y,
                    int64_t ldy) {
  const int64_t ahead = sizeof(W) == 2 ? 4 * cols : 0;  // x B rows below
  int64_t t = 0;
  for (; t + 4 <= T; t += 4)
    rows_tiled<4, 3>(x + t * cols, cols, w, nr, cols, y + t * ldy, ldy, 3 * ahead);
  if (T - t >= 2) {
    rows_tiled<2, 4>(x + t * cols, cols, w, nr, cols, y + t * ldy, ldy, 4 * ahead);
    t += 2;
  }
  if (T - t == 1) rows_tiled<1, 8>(x + t * cols, cols, w, nr, cols, y + t * ldy, ldy, 8 * ahead);
}

void gemv_bf16(const float* x, int64_t T, const uint16_t* w, int64_t cols, int64_t r0, int64_t nr,
               float* y, int64_t ldy) {
  tokens_by_rows(x, T, w + r0 * cols, nr, cols, y + r0, ldy);
}

// Rows ra and rb of MXFP4 weights against N (1 or 2) inputs: 2N independent chains, each group
// decoded once for all N. The rows eight pairs ahead (consecutive in memory) are prefetched
// into L2, as in the BF16 GEMV.
template <int N>
void rows_mxfp4(const float* x, int64_t cols, const uint8_t* pa, const uint8_t* pb,
                const uint8_t* sa, const uint8_t* sb, int64_t ahead_packed, int64_t ahead_scales,
                float* ya, float* yb, int64_t ldy) {
  constexpr int64_t kGroupsPerLine = 4;  // a group packs 16 bytes
  const DotGroupDecoder decode;
  const int64_t groups = cols / 32;
  __m256 acc[N][2];
  for (auto& r : acc) r[0] = r[1] = _mm256_setzero_ps();
  prefetch_lines(sa + ahead_scales, 2 * groups);
  for (int64_t g = 0; g < groups; ++g) {
    if (g % kGroupsPerLine == 0) {
      _mm_prefetch(reinterpret_cast<const char*>(pa + g * 16 + ahead_packed), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(pb + g * 16 + ahead_packed), _MM_HINT_T1);
    }
    __m256 va[4], vb[4];
    decode(pa + g * 16, sa[g], va);
    decode(pb + g * 16, sb[g], vb);
    for (int t = 0; t < N; ++t)
      for (int q = 0; q < 4; ++q) {
        const __m256 xv = _mm256_loadu_ps(x + t * cols + g * 32 + q * kLanes);
        acc[t][0] = _mm256_fmadd_ps(xv, va[q], acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(xv, vb[q], acc[t][1]);
      }
  }
  for (int t = 0; t < N; ++t) {
    ya[t * ldy] = hsum(acc[t][0]);
    yb[t * ldy] = hsum(acc[t][1]);
  }
}

// Two rows at a time (an odd last row is computed twice), tokens two at a time.
void gemv_mxfp4(const float* x, int64_t T, const uint8_t* packed, const uint8_t* scales,
                int64_t cols, int64_t r0, int64_t nr, float* y, int64_t ldy) {
  constexpr int64_t kPairsAhead = 8;
  const int64_t pb = cols / 2, sb = cols / 32;
  const int64_t ahead_packed = kPairsAhead * 2 * pb, ahead_scales = kPairsAhead * 2 * sb;
  for (int64_t j0 = 0; j0 < nr; j0 += 2) {
    const int64_t ra = r0 + j0, rb = j0 + 1 < nr ? ra + 1 : ra;
    const uint8_t *pa = packed + ra * pb, *pbk = packed + rb * pb;
    const uint8_t *sa = scales + ra * sb, *sbk = scales + rb * sb;
    int64_t t = 0;
    for (; t + 2 <= T; t += 2)
      rows_mxfp4<2>(x + t * cols, cols, pa, pbk, sa, sbk, ahead_packed, ahead_scales,
                    y + t * ldy + ra, y + t * ldy + rb, ldy);
    if (t < T)
      rows_mxfp4<1>(x + t * cols, cols, pa, pbk, sa, sbk, ahead_packed, ahead_scales,
                    y + t * ldy + ra, y + t * ldy + rb, ldy);
  }
}

// y[t, r0 + j] for the nr decoded rows, tiled as the BF16 GEMV (the same bits per output).
void block_product(const float* x, int64_t T, const float* rows, int64_t nr, int64_t cols,
                   int64_t ldy, int64_t r0, float* y) {
  tokens_by_rows(x, T, rows, nr, cols, y + r0, ldy);
}

}  // namespace

// Direct MXFP4 up to T = 4 (each group decoded once per two tokens); larger T decode rows once.
// Measured at 512 x 1024, one thread: T = 3 138 us direct against 250 decoded (no 4-token tile
// there), T = 4 147 against 178.
const LinearKernels kLinearKernels = {.isa = "avx2",
                                      .lanes = kLanes,
                                      .mxfp4_direct_max_t = 4,
                                      .widen_bf16 = widen_bf16,
                                      .mxfp4_decode = mxfp4_decode,
                                      .mxfp4_decode_pairs = nullptr,  // natural order
                                      .pair_columns = nullptr,
                                      .gemv_bf16 = gemv_bf16,
                                      .gemv_mxfp4 = gemv_mxfp4,
                                      .block_product = block_product};

}  // namespace k3::avx2
