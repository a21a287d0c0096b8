// SiTU-GLU for AVX-512 (16 lanes). Built with the AVX-512 flags (CMakeLists.txt: *_avx512.cpp);
// runs only when cpu_isa picks avx512. The same arithmetic as situ_avx2.cpp, lane for lane.
// GCC 12's AVX-512 min/max/roundscale intrinsics pass _mm512_undefined_ps() as their unused
// merge source, which -Wmaybe-uninitialized reports once inlined here: a known false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "ops/situ/situ_kernels.h"

namespace k3::avx512 {
namespace {

// e^x for x in [-87.3, 88.3] (clamped outside): x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6
// polynomial (Cephes' coefficients), times 2^n through the exponent bits. About 1 ulp.
inline __m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

// tanh(x): the odd Taylor series to x^11 for |x| < 0.25 (no cancellation there), else
// (1 - t) / (1 + t) with t = e^(-2|x|), the sign put back.
inline __m512 tanh_ps(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 t = exp_ps(_mm512_mul_ps(ax, _mm512_set1_ps(-2.0f)));
  const __m512 big =
      _mm512_div_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), t), _mm512_add_ps(_mm512_set1_ps(1.0f), t));
  const __m512 x2 = _mm512_mul_ps(ax, ax);
  __m512 p = _mm512_set1_ps(-1382.0f / 155925.0f);
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(62.0f / 2835.0f));
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-17.0f / 315.0f));
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(2.0f / 15.0f));
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-1.0f / 3.0f));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, x2), ax, ax);
  const __mmask16 is_small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.25f), _CMP_LT_OQ);
  const __m512 mag = _mm512_mask_blend_ps(is_small, big, small);
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag), sign));
}

inline __m512 situ16(__m512 a, __m512 b, __m512 beta, __m512 inv_beta, __m512 lbeta,
                     __m512 inv_lbeta) {
  const __m512 sigma = _mm512_div_ps(
      _mm512_set1_ps(1.0f),
      _mm512_add_ps(_mm512_set1_ps(1.0f), exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), a))));
  const __m512 gate =
      _mm512_mul_ps(_mm512_mul_ps(beta, tanh_ps(_mm512_mul_ps(a, inv_beta))), sigma);
  return _mm512_mul_ps(gate, _mm512_mul_ps(lbeta, tanh_ps(_mm512_mul_ps(b, inv_lbeta))));
}

void situ_glu(const float* gate, const float* up, int64_t n, float beta, float linear_beta,
              float* out) {
  const __m512 b1 = _mm512_set1_ps(beta), ib1 = _mm512_set1_ps(1.0f / beta);
  const __m512 b2 = _mm512_set1_ps(linear_beta), ib2 = _mm512_set1_ps(1.0f / linear_beta);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 y = situ16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i), b1, ib1, b2, ib2);
    _mm512_storeu_ps(out + i, y);
  }
  if (i < n) {  // the tail through a padded copy (GCC 12 warns on masked loads here)
    float a[16] = {}, b[16] = {}, y[16];
    for (int64_t j = 0; j < n - i; ++j) a[j] = gate[i + j], b[j] = up[i + j];
    _mm512_storeu_ps(y, situ16(_mm512_loadu_ps(a), _mm512_loadu_ps(b), b1, ib1, b2, ib2));
    for (int64_t j = 0; j < n - i; ++j) out[i + j] = y[j];
  }
}

}  // namespace

const SituKernels kSituKernels = {"avx512", situ_glu};

}  // namespace k3::avx512
