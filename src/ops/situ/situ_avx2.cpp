// SiTU-GLU for AVX2 + FMA (8 lanes). Built with the AVX2 flags (CMakeLists.txt: *_avx2.cpp);
// runs only when cpu_isa picks avx2. The same arithmetic as situ_avx512.cpp, lane for lane.
#include <immintrin.h>

#include <cstdint>

#include "ops/situ/situ_kernels.h"

namespace k3::avx2 {
namespace {

inline __m256 set1(float v) { return _mm256_set1_ps(v); }

// e^x for x in [-87.3, 88.3] (clamped outside): x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6
// polynomial (Cephes' coefficients), times 2^n through the exponent bits. About 1 ulp.
inline __m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, set1(-87.3f)), set1(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, set1(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, set1(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, set1(-2.12194440e-4f), r);
  __m256 p = set1(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, set1(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, set1(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, set1(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, set1(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, set1(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, set1(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// tanh(x): the odd Taylor series to x^11 for |x| < 0.25 (no cancellation there), else
// (1 - t) / (1 + t) with t = e^(-2|x|), the sign put back.
inline __m256 tanh_ps(__m256 x) {
  const __m256 sign_bit = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  const __m256 ax = _mm256_andnot_ps(sign_bit, x);
  const __m256 t = exp_ps(_mm256_mul_ps(ax, set1(-2.0f)));
  const __m256 big = _mm256_div_ps(_mm256_sub_ps(set1(1.0f), t), _mm256_add_ps(set1(1.0f), t));
  const __m256 x2 = _mm256_mul_ps(ax, ax);
  __m256 p = set1(-1382.0f / 155925.0f);
  p = _mm256_fmadd_ps(p, x2, set1(62.0f / 2835.0f));
  p = _mm256_fmadd_ps(p, x2, set1(-17.0f / 315.0f));
  p = _mm256_fmadd_ps(p, x2, set1(2.0f / 15.0f));
  p = _mm256_fmadd_ps(p, x2, set1(-1.0f / 3.0f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, x2), ax, ax);
  const __m256 mag = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, set1(0.25f), _CMP_LT_OQ));
  return _mm256_or_ps(mag, _mm256_and_ps(x, sign_bit));
}

inline __m256 situ8(__m256 a, __m256 b, float beta, float linear_beta) {
  const __m256 sigma = _mm256_div_ps(
      set1(1.0f), _mm256_add_ps(set1(1.0f), exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), a))));
  const __m256 gate =
      _mm256_mul_ps(_mm256_mul_ps(set1(beta), tanh_ps(_mm256_mul_ps(a, set1(1.0f / beta)))), sigma);
  return _mm256_mul_ps(
      gate, _mm256_mul_ps(set1(linear_beta), tanh_ps(_mm256_mul_ps(b, set1(1.0f / linear_beta)))));
}

void situ_glu(const float* gate, const float* up, int64_t n, float beta, float linear_beta,
              float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i,
                     situ8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), beta, linear_beta));
  }
  if (i < n) {  // the tail through a padded copy
    float a[8] = {}, b[8] = {}, y[8];
    for (int64_t j = 0; j < n - i; ++j) a[j] = gate[i + j], b[j] = up[i + j];
    _mm256_storeu_ps(y, situ8(_mm256_loadu_ps(a), _mm256_loadu_ps(b), beta, linear_beta));
    for (int64_t j = 0; j < n - i; ++j) out[i + j] = y[j];
  }
}

}  // namespace

const SituKernels kSituKernels = {"avx2", situ_glu};

}  // namespace k3::avx2
