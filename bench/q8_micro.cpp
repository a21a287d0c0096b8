// Streaming micro-benchmark of the MXFP4 GEMV (linear at T tokens) in each precision: the slice's
// expert shapes (gate / up 3072 x 3584, down 3584 x 3072), 24 matrices (about 140 MB, far past
// the caches) swept in turn, as a decode step reads its experts; GB/s of weight bytes (nibbles +
// E8M0 scales), median of the passes. Also one matrix over and over ("cache": 5.5 MB, in L3).
// Not built by CMake; after a Release build:
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/q8_micro.cpp build/libk3.a -lpthread -o /tmp/q8_micro
//   K3_THREADS=1 /tmp/q8_micro [T] [bf16]
// With "bf16" the same shapes are BF16 matrices (the trunk's GEMV, for comparison).
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_isa.h"
#include "core/precision.h"
#include "ops/linear/linear.h"

namespace {

struct Matrix {
  uint8_t* packed;
  uint8_t* scales;
  k3::Mat mat;
};

uint8_t* huge_alloc(size_t n) {  // 2 MB pages where the kernel gives them (fewer TLB misses)
  const size_t a = size_t{1} << 21;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(a, (n + a - 1) / a * a));
  madvise(p, n, MADV_HUGEPAGE);
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t T = argc > 1 ? std::atoll(argv[1]) : 1;
  const bool bf16 = argc > 2 && std::string(argv[2]) == "bf16";
  const double per_weight = bf16 ? 2.0 : 0.5 + 1.0 / 32;  // bytes
  std::mt19937_64 rng(1);
  std::vector<Matrix> ms;
  for (int i = 0; i < 24; ++i) {
    const int64_t rows = i % 3 == 2 ? 3584 : 3072, cols = i % 3 == 2 ? 3072 : 3584;
    const int64_t nbytes = bf16 ? rows * cols * 2 : rows * cols / 2;
    Matrix m{huge_alloc(nbytes), huge_alloc(rows * cols / 32), {}};
    for (int64_t j = 0; j < nbytes; ++j)  // bf16: small values (high byte 0x3c or below)
      m.packed[j] = static_cast<uint8_t>(bf16 && j % 2 == 1 ? 0x3c : rng());
    for (int64_t j = 0; j < rows * cols / 32; ++j) m.scales[j] = 118 + rng() % 9;
    m.mat =
        k3::Mat{rows, cols, bf16 ? k3::MatFormat::bf16 : k3::MatFormat::mxfp4, m.packed, m.scales};
    ms.push_back(m);
  }
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(T * 3584), y(T * 3584);
  for (auto& v : x) v = normal(rng);
  double bytes = 0;
  for (const Matrix& m : ms) bytes += m.mat.rows * m.mat.cols * per_weight;
  std::printf("cpu path %s, T=%lld, %zu matrices, %.0f MB\n", k3::isa_name(k3::active_isa()),
              static_cast<long long>(T), ms.size(), bytes / 1e6);
  for (const char* p : {"fp32", "bf16", "q8"}) {
    k3::set_precision(k3::parse_precision(p));
    std::vector<double> stream, cache;
    for (int pass = 0; pass < 7; ++pass) {
      auto t0 = std::chrono::steady_clock::now();
      for (const Matrix& m : ms) k3::linear(x.data(), T, m.mat, y.data());
      std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
      stream.push_back(bytes / dt.count() / 1e9);
      t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < ms.size(); ++i) k3::linear(x.data(), T, ms[0].mat, y.data());
      dt = std::chrono::steady_clock::now() - t0;
      cache.push_back(ms[0].mat.rows * ms[0].mat.cols * per_weight * ms.size() / dt.count() / 1e9);
    }
    std::printf("%-5s stream %6.2f GB/s (min %6.2f, max %6.2f)   cache %6.2f GB/s\n", p,
                median(stream), *std::min_element(stream.begin(), stream.end()),
                *std::max_element(stream.begin(), stream.end()), median(cache));
  }
}
