// Linear layers on the device: y [T, rows] = x [T, cols] · Wᵀ, fp32 accumulation, W in its
// stored format.
//   T <= 8: a GEMV kernel straight from the stored bytes (BF16, F32, or packed MXFP4 decoded in
//           registers), one warp per weight row, every weight byte read once (decode).
//   T > 8:  tensor-core GEMM through cuBLAS. x is split into bf16 hi + lo parts (x = hi + lo to
//           about 2^-16 relative), both multiplied in one GEMM against the BF16 weights with
//           fp32 accumulation and summed, so the result keeps near-fp32 accuracy. MXFP4 weights
//           are first widened to BF16 (exact: E2M1 × 2^k fits a bf16) in scratch; F32 weights
//           use SGEMM.
#include <cuda_bf16.h>

#include "backend/cuda/launchers.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/runtime.cuh"
#include "ops/mxfp4/mxfp4.h"

namespace k3 {
namespace {

using cuda::Args;
using cuda::blocks_for;
using cuda::check_launch;
using cuda::stream;

constexpr int kGemvMaxT = 8;
constexpr int kWarpsPerBlock = 8;

__device__ inline float bf16_bits(uint32_t b) { return __uint_as_float(b << 16); }

__device__ inline float e8m0(uint8_t s) {
  if (s == 0) return ldexpf(1.0f, -127);
  return __uint_as_float(uint32_t{s} << 23);  // 255 gives inf/NaN, as on the CPU (not expected)
}

__device__ inline float fp4(uint32_t n) {
  constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMag[n & 7];
  return (n & 8) ? -m : m;
}

// acc[t] += Σ_j vals[j] · x[t, i0 + j] for 8 consecutive weights.
template <int kT>
__device__ inline void fma8(const float* vals, const float* x, int64_t cols, int64_t i0, int T,
                            float* acc) {
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    if (t >= T) break;
    const float4 a = *reinterpret_cast<const float4*>(x + t * cols + i0);
    const float4 b = *reinterpret_cast<const float4*>(x + t * cols + i0 + 4);
    acc[t] += vals[0] * a.x + vals[1] * a.y + vals[2] * a.z + vals[3] * a.w + vals[4] * b.x +
              vals[5] * b.y + vals[6] * b.z + vals[7] * b.w;
  }
}

template <int kT>
__device__ inline void finish(float* acc, int T, int64_t rows, int64_t r, float* y) {
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    if (t >= T) break;
    const float v = cuda::warp_sum(acc[t]);
    if (threadIdx.x % 32 == 0) y[t * rows + r] = v;
  }
}

// BF16, cols % 8 == 0: each lane reads 16 bytes (8 weights) per step.
template <int kT>
__global__ void gemv_bf16(const float* x, int T, const uint16_t* w, int64_t rows, int64_t cols,
                          float* y) {
  const int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  float acc[kT] = {};
  const uint16_t* wr = w + r * cols;
  for (int64_t i = lane * 8; i < cols; i += 256) {
    const uint4 raw = *reinterpret_cast<const uint4*>(wr + i);
    const uint32_t p[4] = {raw.x, raw.y, raw.z, raw.w};
    float vals[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      vals[2 * j] = bf16_bits(p[j] & 0xffffu);
      vals[2 * j + 1] = bf16_bits(p[j] >> 16);
    }
    fma8<kT>(vals, x, cols, i, T, acc);
  }
  finish<kT>(acc, T, rows, r, y);
}

// MXFP4: each lane decodes whole groups of 32 (16 packed bytes + one scale) in registers.
template <int kT>
__global__ void gemv_mxfp4(const float* x, int T, const uint8_t* packed, const uint8_t* scales,
                           int64_t rows, int64_t cols, float* y) {
  const int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  float acc[kT] = {};
  const int64_t groups = cols / 32;
  const uint8_t* pr = packed + r * (cols / 2);
  const uint8_t* sr = scales + r * groups;
  for (int64_t g = lane; g < groups; g += 32) {
    const uint4 raw = *reinterpret_cast<const uint4*>(pr + g * 16);
    const float sc = e8m0(sr[g]);
    const uint32_t p[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // 4 bytes -> 8 weights
      float vals[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) vals[j] = fp4((p[q] >> (4 * j)) & 0xfu) * sc;
      fma8<kT>(vals, x, cols, g * 32 + q * 8, T, acc);
    }
  }
  finish<kT>(acc, T, rows, r, y);
}

// Any shape, any format (F32, or BF16 with cols % 8 != 0): one element at a time.
template <int kT>
__global__ void gemv_scalar(const float* x, int T, const void* w, bool bf16, int64_t rows,
                            int64_t cols, float* y) {
  const int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  float acc[kT] = {};
  for (int64_t i = lane; i < cols; i += 32) {
    const float v = bf16 ? bf16_bits(static_cast<const uint16_t*>(w)[r * cols + i])
                         : static_cast<const float*>(w)[r * cols + i];
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      if (t < T) acc[t] += v * x[t * cols + i];
    }
  }
  finish<kT>(acc, T, rows, r, y);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether the vectorised GEMV kernels may read x and W 16 bytes at a time.
bool vector_ok(const float* x, const Mat& w, const void* data) {
  return aligned16(x) && aligned16(data) && w.cols % 8 == 0;
}

template <int kT>
void gemv(const float* x, int T, const Mat& w, const void* data, const uint8_t* scales, float* y) {
  const int grid = blocks_for(w.rows, kWarpsPerBlock), threads = 32 * kWarpsPerBlock;
  const bool vec = vector_ok(x, w, data);
  if (w.format == MatFormat::mxfp4) {
    gemv_mxfp4<kT><<<grid, threads, 0, stream()>>>(x, T, static_cast<const uint8_t*>(data), scales,
                                                   w.rows, w.cols, y);
  } else if (w.format == MatFormat::bf16 && vec) {
    gemv_bf16<kT><<<grid, threads, 0, stream()>>>(x, T, static_cast<const uint16_t*>(data), w.rows,
                                                  w.cols, y);
  } else {
    gemv_scalar<kT><<<grid, threads, 0, stream()>>>(x, T, data, w.format == MatFormat::bf16, w.rows,
                                                    w.cols, y);
  }
  check_launch("linear (gemv)");
}

// ---- the GEMM path ----

// xs [2T, C] bf16: rows 0..T-1 the rounded x, rows T..2T-1 the remainder.
__global__ void split_bf16(const float* x, int64_t n, __nv_bfloat16* hi, __nv_bfloat16* lo) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const __nv_bfloat16 h = __float2bfloat16_rn(v);
  hi[i] = h;
  lo[i] = __float2bfloat16_rn(v - __bfloat162float(h));
}

__global__ void add_halves(const float* tmp, int64_t n, float* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = tmp[i] + tmp[n + i];
}

__global__ void widen_mxfp4(const uint8_t* packed, const uint8_t* scales, int64_t n_bytes,
                            int64_t cols, __nv_bfloat16* out) {
  const int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;  // one packed byte
  if (b >= n_bytes) return;
  const int64_t e = 2 * b, r = e / cols, c = e % cols;
  const float sc = e8m0(scales[r * (cols / 32) + c / 32]);
  const uint32_t v = packed[b];
  out[e] = __float2bfloat16_rn(fp4(v & 0xfu) * sc);
  out[e + 1] = __float2bfloat16_rn(fp4(v >> 4) * sc);
}

// y [T, R] = x [T, C] · W [R, C]ᵀ with W bf16: cuBLAS is column-major, so this is
// yᵀ (R×T) = W (C×R)ᵀ · xᵀ (C×T).
void gemm_bf16_split(const float* x, int64_t T, const __nv_bfloat16* w, int64_t R, int64_t C,
                     float* y) {
  cuda::Scratch xs(2 * T * C * sizeof(__nv_bfloat16)), tmp(2 * T * R * sizeof(float));
  auto* hi = static_cast<__nv_bfloat16*>(xs.get());
  split_bf16<<<blocks_for(T * C, 256), 256, 0, stream()>>>(x, T * C, hi, hi + T * C);
  check_launch("linear (split)");
  const float one = 1.0f, zero = 0.0f;
  cuda::check_blas(cuda::blas_api().gemm_ex(
                       cuda::blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(R),
                       static_cast<int>(2 * T), static_cast<int>(C), &one, w, CUDA_R_16BF,
                       static_cast<int>(C), hi, CUDA_R_16BF, static_cast<int>(C), &zero, tmp.get(),
                       CUDA_R_32F, static_cast<int>(R), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "linear (bf16 gemm)");
  add_halves<<<blocks_for(T * R, 256), 256, 0, stream()>>>(static_cast<const float*>(tmp.get()),
                                                           T * R, y);
  check_launch("linear (sum)");
}

void gemm_f32(const float* x, int64_t T, const float* w, int64_t R, int64_t C, float* y) {
  const float one = 1.0f, zero = 0.0f;
  cuda::check_blas(
      cuda::blas_api().sgemm(cuda::blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(R),
                             static_cast<int>(T), static_cast<int>(C), &one, w, static_cast<int>(C),
                             x, static_cast<int>(C), &zero, y, static_cast<int>(R)),
      "linear (sgemm)");
}

size_t weight_bytes(const Mat& w) {
  switch (w.format) {
    case MatFormat::bf16:
      return static_cast<size_t>(w.rows * w.cols) * 2;
    case MatFormat::f32:
      return static_cast<size_t>(w.rows * w.cols) * 4;
    case MatFormat::mxfp4:
      return static_cast<size_t>(w.rows * w.cols / 2);
  }
  return 0;
}

}  // namespace

void linear_cuda(const float* x, int64_t T, const Mat& w, float* y) {
  if (T == 0 || w.rows == 0) return;
  Args a;
  const float* dx = a.in(x, T * w.cols);
  float* dy = a.out(y, T * w.rows);
  if (w.cols == 0) {  // empty sums
    cuda::check_cuda(cudaMemsetAsync(dy, 0, T * w.rows * sizeof(float), stream()), "linear");
    return;
  }
  check(w.format != MatFormat::mxfp4 || w.cols % kMxfp4Group == 0,
        "linear (cuda): MXFP4 columns must be a multiple of 32");
  const void* data = a.in(static_cast<const uint8_t*>(w.data), weight_bytes(w));
  const uint8_t* scales =
      w.format == MatFormat::mxfp4 ? a.in(w.scales, w.rows * w.cols / kMxfp4Group) : nullptr;
  // MXFP4's GEMV needs 16-byte reads (cols % 32 == 0 makes every row aligned if x and W are).
  const bool gemv_ok = w.format != MatFormat::mxfp4 || vector_ok(dx, w, data);
  if (T <= kGemvMaxT && gemv_ok) {
    gemv<kGemvMaxT>(dx, static_cast<int>(T), w, data, scales, dy);
    return;
  }
  if (w.format == MatFormat::f32) {
    gemm_f32(dx, T, static_cast<const float*>(data), w.rows, w.cols, dy);
    return;
  }
  if (w.format == MatFormat::bf16) {
    gemm_bf16_split(dx, T, static_cast<const __nv_bfloat16*>(data), w.rows, w.cols, dy);
    return;
  }
  cuda::Scratch wide(static_cast<size_t>(w.rows * w.cols) * 2);
  const int64_t n_bytes = w.rows * w.cols / 2;
  widen_mxfp4<<<blocks_for(n_bytes, 256), 256, 0, stream()>>>(
      static_cast<const uint8_t*>(data), scales, n_bytes, w.cols,
      static_cast<__nv_bfloat16*>(wide.get()));
  check_launch("linear (widen mxfp4)");
  gemm_bf16_split(dx, T, static_cast<const __nv_bfloat16*>(wide.get()), w.rows, w.cols, dy);
}

}  // namespace k3
