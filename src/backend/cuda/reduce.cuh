// Block-wide sums for the row kernels (any blockDim.x that is a multiple of 32, up to 1024).
#pragma once

namespace k3::cuda {

template <typename T>
__device__ inline T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Every thread gets the block's total. Safe to call repeatedly in one kernel.
template <typename T>
__device__ inline T block_sum(T v) {
  __shared__ T part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();  // part[] may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  const int n = (blockDim.x + 31) / 32;
  T total = 0;
  for (int i = 0; i < n; ++i) total += part[i];
  return total;
}

}  // namespace k3::cuda
