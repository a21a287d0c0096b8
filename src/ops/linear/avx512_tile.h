// The AVX-512 tiles' reductions, shared by linear_avx512.cpp and linear_avx512bf16.cpp. Only
// those files (built with AVX-512 flags) include this; everything here is in an anonymous
// namespace, so each includes its own copy (internal linkage: no weak symbol that the linker
// could pick for a CPU without AVX-512; core/cpu_isa.h gives the rule).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace k3 {
namespace {

// hsum of 8 accumulators at once, transposed: the same pairings at every level (v[i] + v[i+8],
// then + 4, + 2, + 1; float addition commutes), so each result is bit-identical to
// _mm512_reduce_add_ps(v[b]).
inline void hsum8(const __m512 v[8], float out[8]) {
  __m512 s[4], u[2];
  for (int p = 0; p < 4; ++p)  // [v2p, v2p+1] halves: lanes i + (i + 8)
    s[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int p = 0; p < 2; ++p)  // four rows' quarters: i + (i + 4)
    u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // 128-bit lane k: rows k and k + 4, i + (i + 2), then the last pair.
  const __m512 w = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, f);
  for (int k = 0; k < 4; ++k) {
    out[k] = lanes[4 * k];
    out[k + 4] = lanes[4 * k + 1];
  }
}

// y[a * ldy + b] = the lane sum of acc[a][b] for b < nb: the A*B reductions eight at a time,
// transposed (hsum8: bit-identical to _mm512_reduce_add_ps, a fraction of its shuffles when
// there are many outputs).
template <int A, int B>
inline void store_tile(const __m512 (&acc)[A][B], int64_t nb, float* y, int64_t ldy) {
  constexpr int N = A * B, G = (N + 7) / 8;
  __m512 v[8 * G];
#pragma GCC unroll 32
  for (int i = 0; i < 8 * G; ++i) v[i] = i < N ? acc[i / B][i % B] : _mm512_setzero_ps();
  for (int g = 0; g < G; ++g) {
    float out[8];
    hsum8(v + 8 * g, out);
    for (int i = 8 * g; i < 8 * g + 8 && i < N; ++i)
      if (i % B < nb) y[(i / B) * ldy + i % B] = out[i - 8 * g];
  }
}

}  // namespace
}  // namespace k3
