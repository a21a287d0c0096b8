// Newton–Schulz for Muon on the device (train/newton_schulz.h's iteration, fp32), nb matrices
// of one shape at a time: the Gram matrix, its square and the product as strided-batched cuBLAS
// products, the polynomial and the update element-wise. The per-matrix norm is summed in
// double in a fixed order, so a step repeats bit for bit.
#include <algorithm>

#include "backend/cuda/reduce.cuh"
#include "backend/cuda/runtime.cuh"
#include "train/cuda/train_ops.h"

namespace k3::train::gpu {

using cuda::blas;
using cuda::blas_api;
using cuda::blocks_for;
using cuda::check_blas;
using cuda::check_launch;
using cuda::stream;

namespace {

constexpr int kThreads = 256;

// x [nb, m, n] (wide: m = min(rows, cols)) from g [nb, rows, cols], each matrix scaled to unit
// Frobenius norm (+1e-7, as on the host) and transposed when rows > cols. One block per matrix.
__global__ void unit_wide_kernel(const float* g, int64_t rows, int64_t cols, float* x) {
  const int64_t count = rows * cols;
  const float* gi = g + blockIdx.x * count;
  float* xi = x + blockIdx.x * count;
  double sq = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) sq += double(gi[j]) * double(gi[j]);
  const double norm2 = cuda::block_sum(sq);
  const float inv = static_cast<float>(1.0 / (sqrt(norm2) + 1e-7));
  const bool transpose = rows > cols;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t r = j / cols, c = j % cols;
    xi[transpose ? c * rows + r : j] = gi[j] * inv;
  }
}

// out [nb, rows, cols] from the wide x [nb, cols, rows] (rows > cols).
__global__ void transpose_back_kernel(const float* x, int64_t nb, int64_t rows, int64_t cols,
                                      float* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= nb * rows * cols) return;
  const int64_t b = i / (rows * cols), j = i % (rows * cols), r = j / cols, c = j % cols;
  out[i] = x[b * rows * cols + c * rows + r];
}

// poly = b · A + c · poly (poly holds A² on entry), over n values.
__global__ void poly_kernel(const float* a, int64_t n, float b, float c, float* poly) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) poly[i] = b * a[i] + c * poly[i];
}

// x = a · x + next, over n values.
__global__ void step_kernel(const float* next, int64_t n, float a, float* x) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] = a * x[i] + next[i];
}

// C_i = op(A_i) · op(B_i) (column-major, as cuBLAS sees the row-major buffers), nb at once.
void batched(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
             const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb,
             float* C, int64_t ldc, int64_t sc, int64_t nb, const char* what) {
  const float one = 1.0f, zero = 0.0f;
  check_blas(blas_api().sgemm_strided_batched(
                 blas(), ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                 &one, A, static_cast<int>(lda), sa, B, static_cast<int>(ldb), sb, &zero, C,
                 static_cast<int>(ldc), sc, static_cast<int>(nb)),
             what);
}

// The iteration on x [nb, m, n] (m <= n) in place.
void iterate_wide(float* x, int64_t nb, int64_t m, int64_t n, int steps, float a, float b,
                  float c) {
  DevBuf A(nb * m * m, false), poly(nb * m * m, false), next(nb * m * n, false);
  // Row-major X [m, n] is the column-major [n, m] matrix Xc = Xᵀ (leading dimension n).
  for (int s = 0; s < steps; ++s) {
    // A = X Xᵀ = Xcᵀ Xc  [m, m]
    batched(CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, x, n, m * n, x, n, m * n, A.data(), m, m * m, nb,
            "newton_schulz (gram)");
    batched(CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, A.data(), m, m * m, A.data(), m, m * m, poly.data(),
            m, m * m, nb, "newton_schulz (square)");  // A² = A · A
    poly_kernel<<<blocks_for(nb * m * m, kThreads), kThreads, 0, stream()>>>(A.data(), nb * m * m,
                                                                             b, c, poly.data());
    check_launch("newton_schulz (polynomial)");
    // A, A² and poly hold the matrices themselves in column-major order. next = poly · X is
    // the column-major [n, m] matrix (poly X)ᵀ = Xc · polyᵀ.
    batched(CUBLAS_OP_N, CUBLAS_OP_T, n, m, m, x, n, m * n, poly.data(), m, m * m, next.data(), n,
            m * n, nb, "newton_schulz (product)");
    step_kernel<<<blocks_for(nb * m * n, kThreads), kThreads, 0, stream()>>>(next.data(),
                                                                             nb * m * n, a, x);
    check_launch("newton_schulz (step)");
  }
}

}  // namespace

void newton_schulz_batch(const float* g, float* out, int64_t nb, int64_t rows, int64_t cols,
                         int steps, float a, float b, float c) {
  if (nb <= 0 || rows <= 0 || cols <= 0) return;
  const int64_t m = std::min(rows, cols), n = std::max(rows, cols);
  if (rows <= cols) {
    unit_wide_kernel<<<static_cast<unsigned>(nb), kThreads, 0, stream()>>>(g, rows, cols, out);
    check_launch("newton_schulz (norm)");
    iterate_wide(out, nb, m, n, steps, a, b, c);
    return;
  }
  DevBuf x(nb * rows * cols, false);  // [nb, cols, rows]
  unit_wide_kernel<<<static_cast<unsigned>(nb), kThreads, 0, stream()>>>(g, rows, cols, x.data());
  check_launch("newton_schulz (norm)");
  iterate_wide(x.data(), nb, m, n, steps, a, b, c);
  transpose_back_kernel<<<blocks_for(nb * rows * cols, kThreads), kThreads, 0, stream()>>>(
      x.data(), nb, rows, cols, out);
  check_launch("newton_schulz (transpose)");
}

}  // namespace k3::train::gpu
