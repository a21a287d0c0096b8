// Linear layers on the device: y [T, rows] = x [T, cols] · Wᵀ, fp32 accumulation, W in its
// stored format.
//   T <= 8: a GEMV kernel straight from the stored bytes (BF16, F32, or packed MXFP4 decoded in
//           registers), one warp per weight row, every weight byte read once (decode).
//   T > 8:  tensor-core GEMM through cuBLAS. x is split into three bf16 parts (x = hi + mid +
//           lo to about 2^-27 relative), all multiplied in one GEMM against the BF16 weights
//           with fp32 accumulation and summed, so the result keeps fp32 accuracy (the op's
//           1e-6 tolerance; two parts, 2^-18, missed it). In bf16 precision (core/precision.h,
//           as the CPU's: not for F32 weights or Mat::keep_fp32) x is rounded once to bf16
//           instead, one part: a third of the matrix work. MXFP4 weights
//           are first widened to BF16 (exact: E2M1 × 2^k fits a bf16) in scratch; F32 weights
//           use SGEMM.
#include <cuda_bf16.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/gemv.cuh"
#include "backend/cuda/launchers.h"
#include "backend/cuda/runtime.cuh"
#include "core/precision.h"
#include "ops/mxfp4/mxfp4.h"

namespace k3 {
namespace {

using cuda::Args;
using cuda::blocks_for;
using cuda::check_launch;
using cuda::stream;

constexpr int kGemvMaxT = 8;
constexpr int kWarpsPerBlock = 8;

constexpr int kRowsPerWarp = 4;

// BF16, cols % 8 == 0: a warp owns kRowsPerWarp rows, each lane reads 16 bytes of each per step.
// kSplit warps share a row group, each over its own column range, summed through shared
// memory in warp order (deterministic): a matrix with few rows (7168 rows make 224 blocks of
// one warp a group for 132 SMs) then still spreads evenly over the chip.
template <int kT, int kSplit>
__global__ void gemv_bf16(const float* x, int T, const uint16_t* w, int64_t rows, int64_t cols,
                          float* y) {
  constexpr int kGroups = kWarpsPerBlock / kSplit;
  const int warp = threadIdx.x / 32, part = warp % kSplit;
  const int64_t r0 = (blockIdx.x * int64_t{kGroups} + warp / kSplit) * kRowsPerWarp;
  if (kSplit == 1) {
    if (r0 >= rows) return;
    float acc[kT][kRowsPerWarp] = {};
    cuda::rows_dot_bf16<kT, kRowsPerWarp>(w, r0, rows, x, cols, T, acc);
    cuda::warp_finish_rows<kT, kRowsPerWarp>(acc, T, r0, rows, rows, y);
    return;
  }
  __shared__ float part_sums[kWarpsPerBlock][kT][kRowsPerWarp];
  const int64_t per = (cols / 8 + kSplit - 1) / kSplit * 8;
  const int64_t c0 = min(cols, part * per), c1 = min(cols, c0 + per);
  float acc[kT][kRowsPerWarp] = {};
  if (r0 < rows) cuda::rows_dot_bf16_range<kT, kRowsPerWarp>(w, r0, rows, x, cols, c0, c1, T, acc);
#pragma unroll
  for (int t = 0; t < kT; ++t) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float v = cuda::warp_sum(acc[t][r]);
      if (threadIdx.x % 32 == 0) part_sums[warp][t][r] = v;
    }
  }
  __syncthreads();
  // Thread i of the group's first warp: token i / kRowsPerWarp, row i % kRowsPerWarp.
  const int i = threadIdx.x % 32, t = i / kRowsPerWarp, r = i % kRowsPerWarp;
  if (part != 0 || t >= T || t >= kT || r0 + r >= rows) return;
  float sum = 0.0f;
  for (int q = 0; q < kSplit; ++q) sum += part_sums[warp + q][t][r];
  y[t * rows + r0 + r] = sum;
}

// Several BF16 matrices of the same width over one x (linear_multi): block b belongs to the
// segment whose first block is the last one <= b, and runs gemv_bf16<kT, 1>'s rows there.
constexpr int kMaxSegs = 8;
struct GemvSeg {
  const uint16_t* w;
  float* y;
  int64_t rows, block0;
};
struct GemvSegs {
  GemvSeg s[kMaxSegs];
  int n;
};

template <int kT>
__global__ void gemv_bf16_multi(const float* x, int T, GemvSegs segs, int64_t cols) {
  const int64_t b = blockIdx.x;
  int i = 0;
  while (i + 1 < segs.n && b >= segs.s[i + 1].block0) ++i;
  const GemvSeg& sg = segs.s[i];
  const int64_t r0 = ((b - sg.block0) * kWarpsPerBlock + threadIdx.x / 32) * kRowsPerWarp;
  if (r0 >= sg.rows) return;
  float acc[kT][kRowsPerWarp] = {};
  cuda::rows_dot_bf16<kT, kRowsPerWarp>(sg.w, r0, sg.rows, x, cols, T, acc);
  cuda::warp_finish_rows<kT, kRowsPerWarp>(acc, T, r0, sg.rows, sg.rows, sg.y);
}

// MXFP4: decoded in registers from the packed nibbles and scales, kRowsPerWarp rows per warp.
template <int kT>
__global__ void gemv_mxfp4(const float* x, int T, const uint8_t* packed, const uint8_t* scales,
                           int64_t rows, int64_t cols, float* y) {
  const int64_t r0 = (blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32) * kRowsPerWarp;
  if (r0 >= rows) return;
  float acc[kT][kRowsPerWarp] = {};
  cuda::rows_dot_mxfp4<kT, kRowsPerWarp>(packed, scales, r0, rows, x, cols, T, acc);
  cuda::warp_finish_rows<kT, kRowsPerWarp>(acc, T, r0, rows, rows, y);
}

// Any shape, any format (F32, or BF16 with cols % 8 != 0): one element at a time.
template <int kT>
__global__ void gemv_scalar(const float* x, int T, const void* w, bool bf16, int64_t rows,
                            int64_t cols, float* y) {
  const int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  if (r >= rows) return;
  float acc[kT] = {};
  cuda::row_dot_any<kT>(w, bf16, r, x, cols, T, acc);
  cuda::warp_finish<kT>(acc, T, rows, y + r);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether the vectorised GEMV kernels may read x and W 16 bytes at a time.
bool vector_ok(const float* x, const Mat& w, const void* data) {
  return aligned16(x) && aligned16(data) && w.cols % 8 == 0;
}

template <int kT>
void gemv(const float* x, int T, const Mat& w, const void* data, const uint8_t* scales, float* y) {
  const int grid = blocks_for(w.rows, kWarpsPerBlock), threads = 32 * kWarpsPerBlock;
  const int grid_rows = blocks_for(w.rows, kWarpsPerBlock * kRowsPerWarp);
  const bool vec = vector_ok(x, w, data);
  if (w.format == MatFormat::mxfp4) {
    cuda::launch(gemv_mxfp4<kT>, grid_rows, threads, 0, x, T, static_cast<const uint8_t*>(data),
                 scales, w.rows, w.cols, y);
  } else if (w.format == MatFormat::bf16 && vec) {
    // The fewest column splits that give every SM about four blocks (wide rows only).
    const int64_t want = 4 * cuda::sm_count();
    int split = 1;
    while (split < kWarpsPerBlock &&
           blocks_for(w.rows, kWarpsPerBlock / split * kRowsPerWarp) < want &&
           w.cols / (2 * split) >= 256) {
      split *= 2;
    }
    const int grid_split = blocks_for(w.rows, kWarpsPerBlock / split * kRowsPerWarp);
    const auto* wd = static_cast<const uint16_t*>(data);
    switch (split) {
      case 1:
        cuda::launch(gemv_bf16<kT, 1>, grid_rows, threads, 0, x, T, wd, w.rows, w.cols, y);
        break;
      case 2:
        cuda::launch(gemv_bf16<kT, 2>, grid_split, threads, 0, x, T, wd, w.rows, w.cols, y);
        break;
      case 4:
        cuda::launch(gemv_bf16<kT, 4>, grid_split, threads, 0, x, T, wd, w.rows, w.cols, y);
        break;
      default:
        cuda::launch(gemv_bf16<kT, 8>, grid_split, threads, 0, x, T, wd, w.rows, w.cols, y);
    }
  } else {
    cuda::launch(gemv_scalar<kT>, grid, threads, 0, x, T, data, w.format == MatFormat::bf16, w.rows,
                 w.cols, y);
  }
  check_launch("linear (gemv)");
}

// ---- the GEMM path ----

// xs [3T, C] bf16: x = hi + mid + lo to about 2^-27 relative (rows 0..T-1, T..2T-1, 2T..3T-1).
__global__ void split_bf16(const float* x, int64_t n, __nv_bfloat16* xs) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const __nv_bfloat16 hi = __float2bfloat16_rn(v);
  const float r1 = v - __bfloat162float(hi);
  const __nv_bfloat16 mid = __float2bfloat16_rn(r1);
  xs[i] = hi;
  xs[n + i] = mid;
  xs[2 * n + i] = __float2bfloat16_rn(r1 - __bfloat162float(mid));
}

// y = tmp_hi + (tmp_mid + tmp_lo): the small parts first.
__global__ void add_thirds(const float* tmp, int64_t n, float* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = tmp[i] + (tmp[n + i] + tmp[2 * n + i]);
}

__global__ void widen_mxfp4(const uint8_t* packed, const uint8_t* scales, int64_t n_bytes,
                            int64_t cols, __nv_bfloat16* out) {
  const int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;  // one packed byte
  if (b >= n_bytes) return;
  const int64_t e = 2 * b, r = e / cols, c = e % cols;
  const float sc = cuda::e8m0(scales[r * (cols / 32) + c / 32]);
  const uint32_t v = packed[b];
  out[e] = __float2bfloat16_rn(cuda::fp4(v & 0xfu) * sc);
  out[e + 1] = __float2bfloat16_rn(cuda::fp4(v >> 4) * sc);
}

// xb [T, C] = x rounded to bf16 (round to nearest even, as the CPU's f32_to_bf16).
__global__ void round_bf16(const float* x, int64_t n, __nv_bfloat16* xb) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) xb[i] = __float2bfloat16_rn(x[i]);
}

// out [n_rows, R] fp32 = xs [n_rows, C] · W [R, C]ᵀ with W bf16: cuBLAS is column-major, so
// this is outᵀ (R×n) = W (C×R)ᵀ · xsᵀ (C×n).
void gemm_bf16(const __nv_bfloat16* xs, int64_t n_rows, const __nv_bfloat16* w, int64_t R,
               int64_t C, float* out) {
  const float one = 1.0f, zero = 0.0f;
  if (!cuda::gate_call("gemm_bf16", xs, n_rows, w, R, C, out)) return;
  cuda::check_blas(cuda::blas_api().gemm_ex(
                       cuda::blas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(R),
                       static_cast<int>(n_rows), static_cast<int>(C), &one, w, CUDA_R_16BF,
                       static_cast<int>(C), xs, CUDA_R_16BF, static_cast<int>(C), &zero, out,
                       CUDA_R_32F, static_cast<int>(R), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "linear (bf16 gemm)");
}

// y [T, R] = x [T, C] · W [R, C]ᵀ with W bf16: the 3T rows of the split x in one GEMM, summed;
// or (one_part) x rounded to bf16 once.
void gemm_bf16_split(const float* x, int64_t T, const __nv_bfloat16* w, int64_t R, int64_t C,
                     bool one_part, float* y) {
  if (one_part) {
    cuda::Scratch xs(T * C * sizeof(__nv_bfloat16));
    auto* xb = static_cast<__nv_bfloat16*>(xs.get());
    cuda::launch(round_bf16, blocks_for(T * C, 256), 256, 0, x, T * C, xb);
    check_launch("linear (round)");
    gemm_bf16(xb, T, w, R, C, y);
    return;
  }
  cuda::Scratch xs(3 * T * C * sizeof(__nv_bfloat16)), tmp(3 * T * R * sizeof(float));
  auto* parts = static_cast<__nv_bfloat16*>(xs.get());
  cuda::launch(split_bf16, blocks_for(T * C, 256), 256, 0, x, T * C, parts);
  check_launch("linear (split)");
  gemm_bf16(parts, 3 * T, w, R, C, static_cast<float*>(tmp.get()));
  cuda::launch(add_thirds, blocks_for(T * R, 256), 256, 0, static_cast<const float*>(tmp.get()),
               T * R, y);
  check_launch("linear (sum)");
}

void gemm_f32(const float* x, int64_t T, const float* w, int64_t R, int64_t C, float* y) {
  const float one = 1.0f, zero = 0.0f;
  if (!cuda::gate_call("gemm_f32", x, T, w, R, C, y)) return;
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

namespace cuda {

void linear_device(const float* x, int64_t T, const Mat& w, float* y) {
  if (T == 0 || w.rows == 0) return;
  if (w.cols == 0) {  // empty sums
    memset_async(y, 0, T * w.rows * sizeof(float), "linear");
    return;
  }
  check(w.format != MatFormat::mxfp4 || w.cols % kMxfp4Group == 0,
        "linear (cuda): MXFP4 columns must be a multiple of 32");
  // MXFP4's GEMV needs 16-byte reads (cols % 32 == 0 makes every row aligned if x and W are).
  const bool gemv_ok = w.format != MatFormat::mxfp4 || vector_ok(x, w, w.data);
  if (T == 1 && gemv_ok) {  // the decode case: fewer registers, more warps in flight
    gemv<1>(x, 1, w, w.data, w.scales, y);
    return;
  }
  if (T <= kGemvMaxT && gemv_ok) {
    gemv<kGemvMaxT>(x, static_cast<int>(T), w, w.data, w.scales, y);
    return;
  }
  if (w.format == MatFormat::f32) {
    gemm_f32(x, T, static_cast<const float*>(w.data), w.rows, w.cols, y);
    return;
  }
  // bf16 precision as on the CPU (linear.cpp): the stored low-precision weights, not the router.
  const bool one_part = active_precision() == Precision::bf16 && !w.keep_fp32;
  if (w.format == MatFormat::bf16) {
    gemm_bf16_split(x, T, static_cast<const __nv_bfloat16*>(w.data), w.rows, w.cols, one_part, y);
    return;
  }
  Scratch wide(static_cast<size_t>(w.rows * w.cols) * 2);
  const int64_t n_bytes = w.rows * w.cols / 2;
  cuda::launch(widen_mxfp4, blocks_for(n_bytes, 256), 256, 0, static_cast<const uint8_t*>(w.data),
               w.scales, n_bytes, w.cols, static_cast<__nv_bfloat16*>(wide.get()));
  check_launch("linear (widen mxfp4)");
  gemm_bf16_split(x, T, static_cast<const __nv_bfloat16*>(wide.get()), w.rows, w.cols, one_part, y);
}

Mat device_mat(Args& a, const Mat& w) {
  Mat d = w;
  d.data = a.in(static_cast<const uint8_t*>(w.data), weight_bytes(w));
  d.scales = w.format == MatFormat::mxfp4 ? a.in(w.scales, w.rows * w.cols / kMxfp4Group) : nullptr;
  return d;
}

}  // namespace cuda

namespace {

// Up to kMaxSegs BF16 matrices (device views, one width) in one launch.
void gemv_multi(const float* x, int T, const Mat* ws, float* const* ys, int n) {
  GemvSegs segs{};
  int64_t blocks = 0;
  for (int i = 0; i < n; ++i) {
    segs.s[i] = {static_cast<const uint16_t*>(ws[i].data), ys[i], ws[i].rows, blocks};
    blocks += blocks_for(ws[i].rows, kWarpsPerBlock * kRowsPerWarp);
  }
  segs.n = n;
  const int threads = 32 * kWarpsPerBlock;
  const auto grid = static_cast<unsigned>(blocks);
  if (T == 1) {
    cuda::launch(gemv_bf16_multi<1>, grid, threads, 0, x, T, segs, ws[0].cols);
  } else {
    cuda::launch(gemv_bf16_multi<kGemvMaxT>, grid, threads, 0, x, T, segs, ws[0].cols);
  }
  check_launch("linear_multi (gemv)");
}

}  // namespace

void linear_multi_cuda(const float* x, int64_t T, const Mat* ws, float* const* ys, int64_t n) {
  if (T == 0 || n == 0) return;
  const int64_t cols = ws[0].cols;
  for (int64_t i = 0; i < n; ++i) {
    check(ws[i].cols == cols, "linear_multi (cuda): matrix ", i, " has ", ws[i].cols,
          " columns, the first ", cols);
  }
  Args a;
  const float* dx = a.in(x, T * cols);
  // BF16 matrices a decode GEMV takes go into shared launches; the rest run as linear does.
  std::vector<Mat> fused;
  std::vector<float*> fused_y;
  for (int64_t i = 0; i < n; ++i) {
    const Mat dw = cuda::device_mat(a, ws[i]);
    float* dy = a.out(ys[i], T * ws[i].rows);
    if (T <= kGemvMaxT && dw.format == MatFormat::bf16 && vector_ok(dx, dw, dw.data) &&
        dw.rows > 0 && cols > 0) {
      fused.push_back(dw);
      fused_y.push_back(dy);
    } else {
      cuda::linear_device(dx, T, dw, dy);
    }
  }
  if (fused.size() == 1) {
    cuda::linear_device(dx, T, fused[0], fused_y[0]);
    return;
  }
  for (size_t i0 = 0; i0 < fused.size(); i0 += kMaxSegs) {
    const int m = static_cast<int>(std::min<size_t>(kMaxSegs, fused.size() - i0));
    gemv_multi(dx, static_cast<int>(T), fused.data() + i0, fused_y.data() + i0, m);
  }
}

void linear_cuda(const float* x, int64_t T, const Mat& w, float* y) {
  if (T == 0 || w.rows == 0) return;
  Args a;
  const float* dx = a.in(x, T * w.cols);
  float* dy = a.out(y, T * w.rows);
  cuda::linear_device(dx, T, cuda::device_mat(a, w), dy);
}

}  // namespace k3
