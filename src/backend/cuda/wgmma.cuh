// Hopper warpgroup matrix multiplies (wgmma, sm_90a): shared-memory matrix descriptors and the
// fences around the asynchronous multiplies. The shapes themselves are in wgmma_ops.cuh.
//
// Layout the descriptors describe: a bf16 tile of rows 64 values (128 bytes) long, K-major,
// with the 128-byte swizzle (16-byte chunk c of row r stored at chunk c ^ (r % 8)), 8-row
// groups 1024 bytes apart, the tile's base 1024-byte aligned. A k16 step inside the row is
// the descriptor plus 32 bytes (the hardware applies the swizzle to the final address).
#pragma once

#include <cstdint>

namespace k3::cuda {

__device__ inline uint64_t wgmma_desc_sw128(const void* tile) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return uint64_t{(addr & 0x3FFFFu) >> 4} | (uint64_t{1} << 16)  // leading offset (unused)
         | (uint64_t{1024 >> 4} << 32)                           // 8-row group stride
         | (uint64_t{1} << 62);                                  // 128-byte swizzle
}

// The descriptor of the k16 step kk of a tile: 32 bytes further along its rows.
__device__ inline uint64_t wgmma_desc_k16(uint64_t desc, int kk) { return desc + 2 * kk; }

// Before the first wgmma of a batch: orders earlier register writes of the accumulators.
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving reads of the accumulators above the wait that completes them.
__device__ inline void wgmma_pin(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Shared memory written by ordinary stores (or cp.async) that a wgmma reads next: each writing
// thread fences before the barrier that publishes it.
__device__ inline void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

}  // namespace k3::cuda
