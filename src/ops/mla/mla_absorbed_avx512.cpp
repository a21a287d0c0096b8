// The absorbed MLA attention's scores and weighted sum for AVX-512 (16 lanes). Built with the
// AVX-512 flags (CMakeLists.txt: *_avx512.cpp); runs only when cpu_isa picks avx512. The
// portable loops (mla.cpp, baseline SSE2) reload the output row for every key; here a block of
// it stays in registers over the tile's keys, and four keys are scored at once.
#include <immintrin.h>

#include <cstdint>

#include "ops/mla/mla_kernels.h"

// GCC 12 flags its own _mm512_reduce_add_ps (an undefined-vector idiom) as uninitialised.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace k3::avx512 {
namespace {

constexpr int64_t kLanes = 16;
constexpr int kKeys = 4;   // keys scored together (independent chains)
constexpr int kBlock = 8;  // output vectors held in registers per pass over the keys

// K keys' dot products with q over [0, n) of each row (row offset `at`), as K accumulators.
template <int K>
void dots(const float* q, const float* const* rows, int64_t at, int64_t n, __m512* acc) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const __m512 qv = _mm512_loadu_ps(q + i);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k)
      acc[k] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(rows[k] + at + i), acc[k]);
  }
}

template <int K>
void score_keys(const float* qt, const float* qr, const float* const* rows, int64_t Dc, int64_t Dr,
                float scale, float* p) {
  __m512 c[K], r[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) c[k] = r[k] = _mm512_setzero_ps();
  dots<K>(qt, rows, 0, Dc, c);
  dots<K>(qr, rows, Dc, Dr, r);
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k)
    p[k] = (_mm512_reduce_add_ps(c[k]) + _mm512_reduce_add_ps(r[k])) * scale;
}

void scores(const float* qt, const float* qr, const float* const* rows, int64_t m, int64_t Dc,
            int64_t Dr, float scale, float* p) {
  int64_t j = 0;
  for (; j + kKeys <= m; j += kKeys) score_keys<kKeys>(qt, qr, rows + j, Dc, Dr, scale, p + j);
  for (; j < m; ++j) score_keys<1>(qt, qr, rows + j, Dc, Dr, scale, p + j);
}

// ob[c0, c0 + 16N) over all m keys, held in N registers.
template <int N>
void accumulate_block(const float* p, const float* const* rows, int64_t m, int64_t c0,
                      float rescale, float* ob) {
  __m512 o[N];
  const __m512 rs = _mm512_set1_ps(rescale);
#pragma GCC unroll 8
  for (int n = 0; n < N; ++n) o[n] = _mm512_mul_ps(_mm512_loadu_ps(ob + c0 + n * kLanes), rs);
  for (int64_t j = 0; j < m; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    const float* row = rows[j] + c0;
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n) o[n] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(row + n * kLanes), o[n]);
  }
#pragma GCC unroll 8
  for (int n = 0; n < N; ++n) _mm512_storeu_ps(ob + c0 + n * kLanes, o[n]);
}

void accumulate(const float* p, const float* const* rows, int64_t m, int64_t Dc, float rescale,
                float* ob) {
  int64_t c0 = 0;
  for (; c0 + kBlock * kLanes <= Dc; c0 += kBlock * kLanes)
    accumulate_block<kBlock>(p, rows, m, c0, rescale, ob);
  for (; c0 < Dc; c0 += kLanes) accumulate_block<1>(p, rows, m, c0, rescale, ob);
}

}  // namespace

const MlaAbsorbedKernels kMlaAbsorbedKernels = {.scores = scores, .accumulate = accumulate};

}  // namespace k3::avx512
