// k3-bench-cuda: device benchmarks (bench/cuda/README in bench/RESULTS.md).
//   k3-bench-cuda ops                          ceilings + cuda launchers at K3 shapes
//   k3-bench-cuda e2e DIR [PREFILL] [GBS]      model prefill + decode at batch 1/16/64
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda.h"
#include "k3/error.h"

namespace k3::bench {
int bench_ops();
int bench_e2e(const std::string& dir, int64_t prefill, const std::vector<int64_t>& batches,
              int64_t steps, double floor_gbs);
}  // namespace k3::bench

int main(int argc, char** argv) {
  try {
    if (!k3::cuda_available()) {
      std::fprintf(stderr, "k3-bench-cuda: no CUDA device\n");
      return 2;
    }
    if (argc >= 2 && std::strcmp(argv[1], "ops") == 0) return k3::bench::bench_ops();
    if (argc >= 3 && std::strcmp(argv[1], "e2e") == 0) {
      const int64_t prefill = argc >= 4 ? std::atoll(argv[3]) : 8192;
      const double gbs = argc >= 5 ? std::atof(argv[4]) : 4227.0;
      // K3_BENCH_E2E_PREFILL_ONLY=1: the prefill alone (no decode batches).
      const bool no_decode = std::getenv("K3_BENCH_E2E_PREFILL_ONLY") != nullptr;
      return k3::bench::bench_e2e(
          argv[2], prefill, no_decode ? std::vector<int64_t>{} : std::vector<int64_t>{1, 16, 64},
          16, gbs);
    }
    std::fprintf(stderr, "usage: k3-bench-cuda ops | e2e MODEL_DIR [PREFILL] [COPY_GB/S]\n");
    return 1;
  } catch (const k3::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
