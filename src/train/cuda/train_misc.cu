// Small data-movement kernels of the device training pass: strided slice copies and adds
// (MLA's latent/rope split and its head sum), and the element-wise product that forms the
// AttnRes mixing weights w = w_norm ⊙ w_proj.
#include "backend/cuda/runtime.cuh"
#include "train/cuda/train_ops.h"

namespace k3::train::gpu {

using cuda::blocks_for;
using cuda::check_launch;
using cuda::stream;

namespace {

template <bool kAdd>
__global__ void strided_kernel(const float* src, int64_t src_ld, float* dst, int64_t dst_ld,
                               int64_t rows, int64_t cols) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const float v = src[r * src_ld + c];
  if (kAdd) {
    dst[r * dst_ld + c] += v;
  } else {
    dst[r * dst_ld + c] = v;
  }
}

__global__ void mul_kernel(const float* a, const float* b, int64_t n, float* y) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] * b[i];
}

__global__ void mul_bwd_kernel(const float* a, const float* b, int64_t n, const float* dy,
                               float* da, float* db) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  if (da != nullptr) da[i] += dy[i] * b[i];
  if (db != nullptr) db[i] += dy[i] * a[i];
}

template <bool kAdd>
void strided(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
             int64_t cols) {
  if (rows * cols == 0) return;
  strided_kernel<kAdd>
      <<<blocks_for(rows * cols, 256), 256, 0, stream()>>>(src, src_ld, dst, dst_ld, rows, cols);
  check_launch(kAdd ? "add_strided" : "copy_strided");
}

}  // namespace

void add_strided(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                 int64_t cols) {
  strided<true>(src, src_ld, dst, dst_ld, rows, cols);
}

void copy_strided(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                  int64_t cols) {
  strided<false>(src, src_ld, dst, dst_ld, rows, cols);
}

void mul_fwd(const float* a, const float* b, int64_t n, float* y) {
  if (n == 0) return;
  mul_kernel<<<blocks_for(n, 256), 256, 0, stream()>>>(a, b, n, y);
  check_launch("mul_fwd");
}

void mul_bwd(const float* a, const float* b, int64_t n, const float* dy, float* da, float* db) {
  if (n == 0) return;
  mul_bwd_kernel<<<blocks_for(n, 256), 256, 0, stream()>>>(a, b, n, dy, da, db);
  check_launch("mul_bwd");
}

}  // namespace k3::train::gpu
