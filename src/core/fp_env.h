// The floating-point environment the CPU kernels run in. On x86 a product or sum whose result
// (or input) is subnormal takes a microcode assist on Intel cores: about a hundred cycles
// instead of one. KDA's gates drive e^Γ and the decayed state far below 1e-38 (a gate of −5 a
// channel reaches it in 18 tokens), so with IEEE subnormals the chunked KDA prefill ran at a few
// GFLOP/s on a Sapphire Rapids core and took half of a K3-small prefill (bench/RESULTS.md).
// Flushing them (MXCSR FTZ and DAZ) changes only values under 1.2e-38, which sit ~30 orders of
// magnitude below any logit's rounding; AMD cores handle subnormals at full speed either way.
// The thread pool (core/thread_pool.h) runs each job in its caller's mode, so a parallel loop
// computes the same bits whichever threads take its chunks.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace k3 {

#if defined(__x86_64__) || defined(__i386__)
// MXCSR's control bits (rounding, masks, FTZ, DAZ), without the sticky exception flags 0-5.
constexpr uint32_t kFpControlMask = ~uint32_t{0x3f};
constexpr uint32_t kFlushSubnormals = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)

inline uint32_t fp_mode() { return _mm_getcsr() & kFpControlMask; }
inline void set_fp_mode(uint32_t mode) {
  const uint32_t now = _mm_getcsr();
  if ((now & kFpControlMask) != mode) _mm_setcsr((now & ~kFpControlMask) | mode);
}
#else
constexpr uint32_t kFlushSubnormals = 0;
inline uint32_t fp_mode() { return 0; }
inline void set_fp_mode(uint32_t) {}
#endif

// Subnormals flushed to zero on this thread (and on the pool's threads, for jobs it starts)
// until the scope ends; the previous mode is restored then.
class FlushSubnormals {
 public:
  FlushSubnormals() : saved_(fp_mode()) { set_fp_mode(saved_ | kFlushSubnormals); }
  ~FlushSubnormals() { set_fp_mode(saved_); }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  uint32_t saved_;
};

}  // namespace k3
