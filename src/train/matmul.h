// Small dense fp32 products for the optimiser (Newton–Schulz works on one weight matrix at a
// time, a few hundred rows): row-major, fp32, on the dispatched GEMM kernels (core/gemm.h).
#pragma once

#include <cstdint>

namespace k3::train {

// c[m, n] = a[m, k] · b[k, n]
void matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);
// c[m, m] = x[m, k] · x[m, k]ᵀ
void gram(const float* x, float* c, int64_t m, int64_t k);
// c[m, m] = a[m, m] · a[m, m] for a symmetric a (a² is symmetric too).
void square_symmetric(const float* a, float* c, int64_t m);
// out[cols, rows] = in[rows, cols]ᵀ
void transpose(const float* in, float* out, int64_t rows, int64_t cols);

}  // namespace k3::train
