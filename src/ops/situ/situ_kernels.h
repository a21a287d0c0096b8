// The SIMD SiTU-GLU kernels, one per instruction set (situ_avx2.cpp / situ_avx512.cpp, each
// built with its own flags); situ.cpp picks one at run time. Raw pointers only: this header
// defines nothing inline (see core/cpu_isa.h for why).
#pragma once

#include <cstdint>

namespace k3 {

struct SituKernels {
  const char* isa;
  // out[i] = φ(gate[i], up[i]) for i < n (any n; out may alias gate).
  void (*situ_glu)(const float* gate, const float* up, int64_t n, float beta, float linear_beta,
                   float* out);
};

namespace avx2 {
extern const SituKernels kSituKernels;
}
namespace avx512 {
extern const SituKernels kSituKernels;
}

}  // namespace k3
