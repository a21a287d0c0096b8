// k3-bench-cuda: device benchmarks (bench/cuda/README in bench/RESULTS.md).
//   k3-bench-cuda ops                          ceilings + cuda launchers at K3 shapes
//   k3-bench-cuda e2e DIR [PREFILL] [GBS]      model prefill + decode at batch 1/16/64
//     (PREFILL 0: no prefill; K3_E2E_BATCHES=1,16 picks the batches; K3_E2E_PROFILE: see e2e)
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
      std::vector<int64_t> batches = {1, 16, 64};
      if (const char* b = std::getenv("K3_E2E_BATCHES")) {  // e.g. "1" or "1,16"
        batches.clear();
        for (const char* p = b; *p != 0;) {
          batches.push_back(std::atoll(p));
          while (*p != 0 && *p != ',') ++p;
          if (*p == ',') ++p;
        }
      }
      // K3_BENCH_E2E_PREFILL_ONLY=1: the prefill alone (no decode batches).
      if (std::getenv("K3_BENCH_E2E_PREFILL_ONLY") != nullptr) batches.clear();
      return k3::bench::bench_e2e(argv[2], prefill, batches, 16, gbs);
    }
    std::fprintf(stderr, "usage: k3-bench-cuda ops | e2e MODEL_DIR [PREFILL] [COPY_GB/S]\n");
    return 1;
  } catch (const k3::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
