// Software prefetch of weight lines into L2, shared by the SIMD linear kernels (linear_avx2.cpp,
// linear_avx512.cpp, linear_avx512bf16.cpp). Each of those files is built with its own ISA
// flags, so everything here is in an anonymous namespace: each includes its own copy (internal
// linkage: no weak symbol the linker could take from a file built for a wider ISA).
//
// Why L2 (T1): a weight sweep (a lone token's GEMV, the first pass of a small batch) reads
// short row streams that the hardware prefetcher barely ramps up on; lines asked for into L1
// (T0) four tiles ahead are evicted from the 32 KB L1 before use (microbenchmark: 11-13 GB/s
// with T0, 17-21 with T1). Prefetches past the end of the weights are harmless (never fault).
#pragma once

#include <xmmintrin.h>

#include <cstdint>

namespace k3 {
namespace {

constexpr int64_t kBf16PerLine = 32;  // BF16 values in a 64-byte cache line

// The line at element `at` of each of B BF16 rows, into L2.
template <int B>
inline void prefetch_rows(const uint16_t* const* row, int64_t at) {
#pragma GCC unroll 8
  for (int b = 0; b < B; ++b) _mm_prefetch(reinterpret_cast<const char*>(row[b] + at), _MM_HINT_T1);
}

// The cache lines of [p, p + n), into L2.
inline void prefetch_lines(const uint8_t* p, int64_t n) {
  for (int64_t i = 0; i < n; i += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T1);
}

}  // namespace
}  // namespace k3
