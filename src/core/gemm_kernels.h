// The register-tiled micro-kernels behind gemm_acc (core/gemm.h), one table per instruction
// set (gemm_avx2.cpp / gemm_avx512.cpp are built with their own flags; see core/cpu_isa.h for
// the rules those files follow). gemm.cpp owns the cache blocking and the threading. Raw
// pointers only: this header defines nothing inline.
#pragma once

#include <cstdint>

namespace k3 {

struct GemmKernels {
  const char* isa;
  int64_t mr, nr;  // the largest tile: rows of A, columns of B
  // c[rows, cols] += A[rows, kc] · b[kc, cols] for rows <= mr, cols <= nr; A's element (i, p)
  // is a[i * a_rs + p * a_cs]. Each c element: one chain over p in order.
  void (*tile)(int64_t rows, int64_t cols, int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
               const float* b, int64_t ldb, float* c, int64_t ldc);
};

namespace avx2 {
extern const GemmKernels kGemmKernels;
}
namespace avx512 {
extern const GemmKernels kGemmKernels;
}

}  // namespace k3
