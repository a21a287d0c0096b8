// The SIMD KDA decode step (one head, one token) for AVX-512 (kda_step_avx512.cpp, built with
// its own flags); kda_recurrent.cpp picks it at run time. Raw pointers only: this header
// defines nothing inline (see core/cpu_isa.h for why).
#pragma once

#include <cstdint>

namespace k3 {

struct KdaStepKernels {
  // The delta-rule step of kda_recurrent.cpp's delta_step on S [K, V] in place, with the decay
  // already exponentiated (decay[i] = e^g[i]); writes o [V]. Returns false (nothing done) for a
  // V it has no registers for.
  bool (*step)(const float* q, const float* k, const float* v, const float* decay, float beta,
               int64_t K, int64_t V, float* S, float* o);
};

namespace avx512 {
extern const KdaStepKernels kKdaStepKernels;
}

}  // namespace k3
