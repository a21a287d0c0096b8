// CUDA-event timing for the device benchmarks: median of repeats after warm-ups.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace k3::bench {

inline void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cuda error in %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Median milliseconds of fn() on `stream`, timed with events around each repeat.
inline double median_ms(cudaStream_t stream, int warmup, int reps,
                        const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  ck(cudaStreamSynchronize(stream), "warm-up");
  cudaEvent_t a, b;
  ck(cudaEventCreate(&a), "event");
  ck(cudaEventCreate(&b), "event");
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    ck(cudaEventRecord(a, stream), "record");
    fn();
    ck(cudaEventRecord(b, stream), "record");
    ck(cudaEventSynchronize(b), "sync");
    float t = 0;
    ck(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace k3::bench
