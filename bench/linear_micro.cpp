// Micro-benchmark of linear (the CPU decode / batched-decode GEMVs and tiles) at the default
// model's and K3-small's shapes, on each SIMD path: best of 15 timed batches (robust on a
// shared machine). Not built by CMake; after a Release build:
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/linear_micro.cpp build/libk3.a \
//       [$CUDA/lib/libcudart_static.a -ldl -lrt] -lpthread -o /tmp/linear_micro
//   K3_THREADS=1 /tmp/linear_micro [T ROWS COLS bf16|mxfp4]...   (default: the shapes below)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_isa.h"
#include "core/fp_env.h"
#include "ops/linear/linear.h"

namespace {

struct Shape {
  int64_t T, rows, cols;
  k3::MatFormat format;
};

// Best time of one linear call in microseconds.
double best_us(const Shape& s, std::mt19937_64& rng) {
  std::vector<uint8_t> bytes(s.rows * s.cols * 2), scales(s.rows * s.cols / 32, 120);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng() & 0x3f);  // small bf16s / any nibbles
  const k3::Mat m{s.rows, s.cols, s.format, bytes.data(), scales.data()};
  std::normal_distribution<float> normal(0, 0.05f);
  std::vector<float> x(s.T * s.cols), y(s.T * s.rows);
  for (auto& v : x) v = normal(rng);
  const int iters = static_cast<int>(2e7 / static_cast<double>(s.T * s.rows * s.cols)) + 1;
  double best = 1e30;
  for (int rep = 0; rep < 15; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) k3::linear(x.data(), s.T, m, y.data());
    const std::chrono::duration<double, std::micro> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count() / iters);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  using k3::MatFormat;
  // As the engine's steps run (core/fp_env.h): the random BF16 bytes below include subnormals,
  // which would otherwise time Intel's microcode assists rather than the kernels.
  const k3::FlushSubnormals flush;
  std::vector<Shape> shapes = {{1, 768, 256, MatFormat::bf16},   {1, 256, 768, MatFormat::bf16},
                               {1, 8192, 256, MatFormat::bf16},  {2, 768, 256, MatFormat::bf16},
                               {4, 768, 256, MatFormat::bf16},   {16, 768, 256, MatFormat::bf16},
                               {16, 8192, 256, MatFormat::bf16}, {128, 768, 256, MatFormat::bf16},
                               {1, 3072, 1024, MatFormat::bf16}, {16, 3072, 1024, MatFormat::bf16},
                               {1, 256, 128, MatFormat::mxfp4},  {1, 128, 256, MatFormat::mxfp4},
                               {1, 512, 1024, MatFormat::mxfp4}, {16, 256, 128, MatFormat::mxfp4}};
  if (argc > 1) shapes.clear();  // or the shapes named: T rows cols bf16|mxfp4, ...
  for (int i = 1; i + 3 < argc; i += 4)
    shapes.push_back({std::atol(argv[i]), std::atol(argv[i + 1]), std::atol(argv[i + 2]),
                      std::string(argv[i + 3]) == "bf16" ? MatFormat::bf16 : MatFormat::mxfp4});
  std::mt19937_64 rng(1);
  for (k3::Isa isa : k3::supported_isas()) {
    k3::set_isa(isa);
    for (const Shape& s : shapes) {
      const double us = best_us(s, rng);
      std::printf("%-7s %-5s T=%-3ld %5ldx%-5ld %9.2f us %7.2f GFLOP/s\n", k3::isa_name(isa),
                  s.format == MatFormat::bf16 ? "bf16" : "mxfp4", static_cast<long>(s.T),
                  static_cast<long>(s.rows), static_cast<long>(s.cols), us,
                  2.0 * s.T * s.rows * s.cols / us * 1e-3);
    }
  }
}
