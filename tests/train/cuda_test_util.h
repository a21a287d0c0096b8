// Helpers of the device training-kernel tests: random host data, device copies, and the
// comparison every test uses (max |a − b| over max(1, max |b|), so a gradient that should be
// tiny is judged absolutely and a large one relatively). Only built with the CUDA backend.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "train/cuda/train_ops.h"

namespace k3::train::gpu::test {

#define K3_SKIP_WITHOUT_GPU() \
  if (!::k3::train::gpu::available()) GTEST_SKIP() << "no CUDA device"

inline std::vector<float> random_vec(std::mt19937_64& rng, int64_t n, float lo = -1.0f,
                                     float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

template <typename T>
DevArray<T> upload(const std::vector<T>& h) {
  DevArray<T> d(static_cast<int64_t>(h.size()));
  if (!h.empty()) to_dev(d.data(), h.data(), d.bytes());
  return d;
}

template <typename T>
std::vector<T> download(const DevArray<T>& d) {
  std::vector<T> h(static_cast<size_t>(d.size()));
  if (!h.empty()) to_host(h.data(), d.data(), d.bytes());
  return h;
}

// max |got − want| / max(1, max |want|).
inline double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, scale = 1;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
    if (!std::isfinite(got[i])) return INFINITY;
  }
  return diff / scale;
}

}  // namespace k3::train::gpu::test
