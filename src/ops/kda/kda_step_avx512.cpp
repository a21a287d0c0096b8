// The KDA decode step for AVX-512 (16 lanes). Built with the AVX-512 flags (CMakeLists.txt:
// *_avx512.cpp); runs only when cpu_isa picks avx512. The portable step (kda_recurrent.cpp)
// keeps u and the output in memory arrays and reloads them for every row of S; here a head's
// u and output (V floats) live in registers for the whole pass, so each element of S costs one
// load, one store and two FMAs per pass. The same operations in the same order as the portable
// step, but with fused multiply-adds (one rounding where it has two): within fp32 rounding of it.
#include <immintrin.h>

#include <cstdint>

#include "ops/kda/kda_step_kernels.h"

namespace k3::avx512 {
namespace {

constexpr int64_t kLanes = 16;

// N = V / 16 register chunks of u and of the output.
template <int N>
void step_chunks(const float* q, const float* k, const float* v, const float* decay, float beta,
                 int64_t K, float* S, float* o) {
  constexpr int64_t V = N * kLanes;
  __m512 u[N];
#pragma GCC unroll 16
  for (int n = 0; n < N; ++n) u[n] = _mm512_loadu_ps(v + n * kLanes);
  for (int64_t i = 0; i < K; ++i) {  // S̄ = diag(e^g) S; u −= S̄ᵀ k
    const __m512 a = _mm512_set1_ps(decay[i]), ki = _mm512_set1_ps(k[i]);
    float* Si = S + i * V;
#pragma GCC unroll 16
    for (int n = 0; n < N; ++n) {
      const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(Si + n * kLanes), a);
      _mm512_storeu_ps(Si + n * kLanes, s);
      u[n] = _mm512_fnmadd_ps(s, ki, u[n]);
    }
  }
  __m512 w[N];
#pragma GCC unroll 16
  for (int n = 0; n < N; ++n) w[n] = _mm512_setzero_ps();
  for (int64_t i = 0; i < K; ++i) {  // S = S̄ + β k uᵀ; o = Sᵀ q
    const __m512 bk = _mm512_set1_ps(beta * k[i]), qi = _mm512_set1_ps(q[i]);
    float* Si = S + i * V;
#pragma GCC unroll 16
    for (int n = 0; n < N; ++n) {
      const __m512 s = _mm512_fmadd_ps(bk, u[n], _mm512_loadu_ps(Si + n * kLanes));
      _mm512_storeu_ps(Si + n * kLanes, s);
      w[n] = _mm512_fmadd_ps(s, qi, w[n]);
    }
  }
#pragma GCC unroll 16
  for (int n = 0; n < N; ++n) _mm512_storeu_ps(o + n * kLanes, w[n]);
}

bool step(const float* q, const float* k, const float* v, const float* decay, float beta, int64_t K,
          int64_t V, float* S, float* o) {
  switch (V) {
    case 64:
      step_chunks<4>(q, k, v, decay, beta, K, S, o);
      return true;
    case 128:
      step_chunks<8>(q, k, v, decay, beta, K, S, o);
      return true;
    case 256:
      step_chunks<16>(q, k, v, decay, beta, K, S, o);
      return true;
    default:
      return false;
  }
}

}  // namespace

const KdaStepKernels kKdaStepKernels = {.step = step};

}  // namespace k3::avx512
