// The training pass's dense algebra on the device: the linear layers' products through cuBLAS
// in fp32 (no TF32: the gradients are checked against the CPU's to 1e-4), and the fixed-order
// column sums that every gradient summed over rows goes through.
#include "backend/cuda/runtime.cuh"
#include "train/cuda/train_ops.h"

namespace k3::train::gpu {

using cuda::blas;
using cuda::blas_api;
using cuda::check_blas;
using cuda::check_launch;
using cuda::stream;

namespace {

// cuBLAS is column-major: a row-major [r, c] buffer is the column-major [c, r] matrix, its
// transpose. The three products below are written in those terms.
void sgemm(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, const char* what) {
  if (m == 0 || n == 0) return;
  const float one = 1.0f;
  if (k == 0) {  // C = beta · C: only reached with beta = 1 (accumulating), i.e. nothing to do
    return;
  }
  check_blas(blas_api().sgemm(blas(), ta, tb, static_cast<int>(m), static_cast<int>(n),
                              static_cast<int>(k), &one, A, static_cast<int>(lda), B,
                              static_cast<int>(ldb), &beta, C, static_cast<int>(ldc)),
             what);
}

constexpr int kColsPerBlock = 32, kRowLanes = 8, kRowsPerChunk = 256;

// partial [chunks, n]: chunk c's sum of rows [c·R, c·R + R), each column summed lane by lane
// (lane l takes rows l, l + 8, …) and the lanes added in order.
__global__ void colsum_partial_kernel(const float* m, int64_t rows, int64_t n, float* partial) {
  __shared__ float lanes[kRowLanes][kColsPerBlock];
  const int64_t col = blockIdx.x * int64_t(kColsPerBlock) + threadIdx.x;
  const int64_t r0 = blockIdx.y * int64_t(kRowsPerChunk);
  const int64_t r1 = min(rows, r0 + kRowsPerChunk);
  float acc = 0.0f;
  if (col < n) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) acc += m[r * n + col];
  }
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < n) {
    float s = 0.0f;
    for (int l = 0; l < kRowLanes; ++l) s += lanes[l][threadIdx.x];
    partial[blockIdx.y * n + col] = s;
  }
}

// out [n] += Σ_c partial[c, n], chunks in order.
__global__ void colsum_finish_kernel(const float* partial, int64_t chunks, int64_t n, float* out) {
  const int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (col >= n) return;
  float s = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) s += partial[c * n + col];
  out[col] += s;
}

}  // namespace

void linear_fwd(const float* x, int64_t N, const float* W, int64_t out, int64_t in, float* y) {
  if (in == 0) {
    dev_zero(y, static_cast<size_t>(N * out) * sizeof(float));
    return;
  }
  // y [N, out] = column-major [out, N] = W · xᵀ; W's buffer is column-major [in, out].
  sgemm(CUBLAS_OP_T, CUBLAS_OP_N, out, N, in, W, in, x, in, 0.0f, y, out, "linear_fwd");
}

void linear_bwd(const float* x, int64_t N, const float* W, int64_t out, int64_t in, const float* dy,
                float* dx, float* dW) {
  // dW [out, in] (column-major [in, out]) += xᵀ · dy.
  if (dW != nullptr) {
    sgemm(CUBLAS_OP_N, CUBLAS_OP_T, in, out, N, x, in, dy, out, 1.0f, dW, in, "linear_bwd dW");
  }
  // dx [N, in] (column-major [in, N]) += Wᵀ · dyᵀ, both as stored.
  if (dx != nullptr) {
    sgemm(CUBLAS_OP_N, CUBLAS_OP_N, in, N, out, W, in, dy, out, 1.0f, dx, in, "linear_bwd dx");
  }
}

void colsum_add(const float* m, int64_t rows, int64_t n, float* out) {
  if (rows == 0 || n == 0) return;
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  DevBuf partial(chunks * n);
  const dim3 grid(static_cast<unsigned>((n + kColsPerBlock - 1) / kColsPerBlock),
                  static_cast<unsigned>(chunks));
  colsum_partial_kernel<<<grid, dim3(kColsPerBlock, kRowLanes), 0, stream()>>>(m, rows, n,
                                                                               partial.data());
  check_launch("colsum_partial");
  colsum_finish_kernel<<<cuda::blocks_for(n, 256), 256, 0, stream()>>>(partial.data(), chunks, n,
                                                                       out);
  check_launch("colsum_finish");
}

}  // namespace k3::train::gpu
