// Dense fp32 accumulate-products for the training path (linear backward, Newton–Schulz):
// C[m, n] += A[m, k] · B[k, n], row-major with leading dimensions, on the active instruction
// set's kernel (core/cpu_isa.h; tables in gemm_kernels.h) and spread over the thread pool when
// the product is large enough.
//
// Every C element is one fp32 chain over p = 0 .. k-1 in order (FMA on the SIMD paths), so a
// result does not depend on the thread count or on how C is tiled: training stays
// deterministic and resumes bit-exactly.
#pragma once

#include <cstdint>

namespace k3 {

// The A operand: element (i, p) is data[i * row_stride + p * col_stride]. A row-major
// [m, k] matrix with leading dimension lda is {a, lda, 1}; the transpose of a row-major
// [k, m] matrix is {a, 1, lda} (no copy needed).
struct GemmA {
  const float* data;
  int64_t row_stride, col_stride;
};

// c[m, n] (leading dimension ldc) += A[m, k] · b[k, n] (leading dimension ldb).
void gemm_acc(int64_t m, int64_t n, int64_t k, GemmA a, const float* b, int64_t ldb, float* c,
              int64_t ldc);

// The plain reference: the same sum in double, one element at a time.
void gemm_acc_ref(int64_t m, int64_t n, int64_t k, GemmA a, const float* b, int64_t ldb, float* c,
                  int64_t ldc);

// The kernel gemm_acc uses now ("scalar", "avx2", "avx512").
const char* gemm_isa();

}  // namespace k3
