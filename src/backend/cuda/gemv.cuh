// Device helpers of the GEMV kernels (linear.cu, moe.cu): one warp computes one weight row's
// dot products with up to kT token rows of x, reading the row once in its stored format.
//   row_dot_bf16   BF16, cols % 8 == 0, x rows 16-byte aligned: 16-byte weight loads
//   row_dot_mxfp4  packed MXFP4 (cols % 32 == 0): 16 columns (8 bytes) per lane per step
//   row_dot_any    BF16 or F32, any shape: one element per lane per step
// acc[t] holds lane partial sums; warp_finish() reduces them (same order for every t, so a
// token's result does not depend on which other tokens share the call).
#pragma once

#include <cstdint>

#include "backend/cuda/reduce.cuh"

namespace k3::cuda {

__device__ inline float bf16_bits(uint32_t b) { return __uint_as_float(b << 16); }

// v[0, 8) = the 8 BF16 values at p (16-byte aligned), widened to fp32.
__device__ inline void load_bf16x8(const uint16_t* p, float (&v)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t q[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = bf16_bits(q[j] & 0xffffu);
    v[2 * j + 1] = bf16_bits(q[j] >> 16);
  }
}

__device__ inline float e8m0(uint8_t s) {
  if (s == 0) return ldexpf(1.0f, -127);
  return __uint_as_float(uint32_t{s} << 23);  // 255 gives inf/NaN, as on the CPU (not expected)
}

// E2M1 nibble -> float, built from its bits (a table indexed at run time would sit in local
// memory): exponent e (2 bits), mantissa m (1 bit); e = 0 is the subnormal m·0.5.
__device__ inline float fp4(uint32_t n) {
  const uint32_t e = (n >> 1) & 3u, m = n & 1u, sign = (n & 8u) << 28;
  const uint32_t bits = e != 0 ? ((e + 126u) << 23) | (m << 22) : (m != 0 ? 0x3f000000u : 0u);
  return __uint_as_float(bits | sign);
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
__device__ inline void row_dot_bf16(const uint16_t* wr, const float* x, int64_t cols, int T,
                                    float* acc) {
  const int lane = threadIdx.x % 32;
#pragma unroll 4
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
}

// Lane l covers 16 consecutive columns per step (8 packed bytes; two lanes share a group's
// scale), so the warp's weight reads and x reads are both contiguous: giving each lane a whole
// group of 32 made its x reads 128 bytes apart (one cache line per lane: 8x the L1 traffic).
template <int kT>
__device__ inline void row_dot_mxfp4(const uint8_t* pr, const uint8_t* sr, const float* x,
                                     int64_t cols, int T, float* acc) {
  const int lane = threadIdx.x % 32;
#pragma unroll 2
  for (int64_t c0 = lane * 16; c0 < cols; c0 += 512) {
    const uint2 raw = *reinterpret_cast<const uint2*>(pr + c0 / 2);
    const float sc = e8m0(sr[c0 / 32]);
    const uint32_t p[2] = {raw.x, raw.y};
#pragma unroll
    for (int q = 0; q < 2; ++q) {  // 4 bytes -> 8 weights: low nibble first
      float vals[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) vals[j] = fp4((p[q] >> (4 * j)) & 0xfu) * sc;
      fma8<kT>(vals, x, cols, c0 + q * 8, T, acc);
    }
  }
}

// ---- kR weight rows per warp: each x value loaded once serves kR rows (x reads, not weight
// bytes, bounded the one-row kernels, most of all with several tokens). Rows past R repeat
// the last row and are not written.

// acc[t][r] += Σ_j vals[r][j] · x[t, i0 + j] for 8 consecutive columns.
template <int kT, int kR>
__device__ inline void fma8_rows(const float (&vals)[kR][8], const float* x, int64_t cols,
                                 int64_t i0, int T, float (&acc)[kT][kR]) {
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    if (t >= T) break;
    const float4 a = *reinterpret_cast<const float4*>(x + t * cols + i0);
    const float4 b = *reinterpret_cast<const float4*>(x + t * cols + i0 + 4);
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const float* v = vals[r];
      acc[t][r] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y +
                   v[6] * b.z + v[7] * b.w;
    }
  }
}

// BF16 rows r0 … r0+kR-1 over columns [c0, c1) of ld (ld, c0, c1 % 8 == 0): lane l reads 16
// bytes of each row per step.
template <int kT, int kR>
__device__ inline void rows_dot_bf16_range(const uint16_t* w, int64_t r0, int64_t R, const float* x,
                                           int64_t ld, int64_t c0, int64_t c1, int T,
                                           float (&acc)[kT][kR]) {
  const int lane = threadIdx.x % 32;
  const uint16_t* row[kR];
#pragma unroll
  for (int r = 0; r < kR; ++r) row[r] = w + min(r0 + r, R - 1) * ld;
#pragma unroll 2
  for (int64_t i = c0 + lane * 8; i < c1; i += 256) {
    float vals[kR][8];
#pragma unroll
    for (int r = 0; r < kR; ++r) load_bf16x8(row[r] + i, vals[r]);
    fma8_rows<kT, kR>(vals, x, ld, i, T, acc);
  }
}

// BF16 rows r0 … r0+kR-1 (cols % 8 == 0): lane l reads 16 bytes of each row per step.
template <int kT, int kR>
__device__ inline void rows_dot_bf16(const uint16_t* w, int64_t r0, int64_t R, const float* x,
                                     int64_t cols, int T, float (&acc)[kT][kR]) {
  rows_dot_bf16_range<kT, kR>(w, r0, R, x, cols, 0, cols, T, acc);
}

// MXFP4 rows r0 … r0+kR-1 (cols % 32 == 0): lane l reads 4 packed bytes (8 columns) of each
// row per step; four lanes share a group's scale.
template <int kT, int kR>
__device__ inline void rows_dot_mxfp4(const uint8_t* packed, const uint8_t* scales, int64_t r0,
                                      int64_t R, const float* x, int64_t cols, int T,
                                      float (&acc)[kT][kR]) {
  const int lane = threadIdx.x % 32;
  const uint8_t* prow[kR];
  const uint8_t* srow[kR];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int64_t rr = min(r0 + r, R - 1);
    prow[r] = packed + rr * (cols / 2);
    srow[r] = scales + rr * (cols / 32);
  }
#pragma unroll 2
  for (int64_t c0 = lane * 8; c0 < cols; c0 += 256) {
    float vals[kR][8];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const uint32_t p = *reinterpret_cast<const uint32_t*>(prow[r] + c0 / 2);
      const float sc = e8m0(srow[r][c0 / 32]);
#pragma unroll
      for (int j = 0; j < 8; ++j) vals[r][j] = fp4((p >> (4 * j)) & 0xfu) * sc;
    }
    fma8_rows<kT, kR>(vals, x, cols, c0, T, acc);
  }
}

// y[t * ldy + r] for the warp's rows r0 … (lane 0 writes the rows that exist).
template <int kT, int kR>
__device__ inline void warp_finish_rows(float (&acc)[kT][kR], int T, int64_t r0, int64_t R,
                                        int64_t ldy, float* y) {
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    if (t >= T) break;
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const float v = warp_sum(acc[t][r]);
      if (threadIdx.x % 32 == 0 && r0 + r < R) y[t * ldy + r0 + r] = v;
    }
  }
}

// Row r of a BF16 (bf16 = true) or F32 matrix of `cols` columns.
template <int kT>
__device__ inline void row_dot_any(const void* w, bool bf16, int64_t r, const float* x,
                                   int64_t cols, int T, float* acc) {
  const int lane = threadIdx.x % 32;
  for (int64_t i = lane; i < cols; i += 32) {
    const float v = bf16 ? bf16_bits(static_cast<const uint16_t*>(w)[r * cols + i])
                         : static_cast<const float*>(w)[r * cols + i];
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      if (t < T) acc[t] += v * x[t * cols + i];
    }
  }
}

// y[t * ldy] = Σ lanes acc[t] (lane 0 writes).
template <int kT>
__device__ inline void warp_finish(float* acc, int T, int64_t ldy, float* y) {
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    if (t >= T) break;
    const float v = warp_sum(acc[t]);
    if (threadIdx.x % 32 == 0) y[t * ldy] = v;
  }
}

}  // namespace k3::cuda
