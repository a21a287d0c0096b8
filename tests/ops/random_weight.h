// Random linear weights of every storage format for the linear tests (test_linear_mxfp4.cpp,
// test_linear_bf16.cpp): N(0, 1/cols) values for F32 and BF16, random nibbles and E8M0
// exponents 118..126 for MXFP4.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "ops/harness.h"
#include "ops/linear/linear.h"

namespace k3::test {

// Random weight storage for a Mat of the given format; kept alive by the returned vectors.
struct Weight {
  std::vector<uint8_t> bytes, scales;
  Mat mat;
};

inline Weight random_weight(std::mt19937_64& rng, int64_t rows, int64_t cols, MatFormat f) {
  Weight w;
  std::vector<float> v = randn(rng, rows * cols, 1.0 / std::sqrt(cols));
  if (f == MatFormat::f32) {
    w.bytes.resize(v.size() * 4);
    std::memcpy(w.bytes.data(), v.data(), w.bytes.size());
  } else if (f == MatFormat::bf16) {
    w.bytes.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t b = f32_to_bf16(v[i]);
      std::memcpy(&w.bytes[2 * i], &b, 2);
    }
  } else {
    w.bytes.resize(rows * cols / 2);
    w.scales.resize(rows * cols / 32);
    std::uniform_int_distribution<int> byte(0, 255), exp(118, 126);
    for (auto& b : w.bytes) b = static_cast<uint8_t>(byte(rng));
    for (auto& s : w.scales) s = static_cast<uint8_t>(exp(rng));
  }
  w.mat = Mat{rows, cols, f, w.bytes.data(), w.scales.empty() ? nullptr : w.scales.data()};
  return w;
}

}  // namespace k3::test
