// Helpers of the whole-model training-pass tests (the GPU pass on a device and emulated on the
// host): a random checkpoint made by `k3 init`, random windows, and the per-tensor comparison.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cli_harness.h"
#include "train/window_batch.h"

namespace k3::test {

// A random checkpoint of config_path in dir/model (seed 11 unless given).
inline std::string init_model(const TempDir& dir, const std::string& config_path,
                              const std::string& seed = "11") {
  const std::string model = dir.file("model");
  const CliResult r = run_k3({"init", "--config", config_path, "-o", model, "--seed", seed});
  if (r.exit_code != 0) throw std::runtime_error("k3 init failed: " + r.err);
  return model;
}

// n windows of T random tokens, each with its next-token targets.
inline std::vector<train::Window> random_windows(int64_t n, int64_t T, int64_t vocab,
                                                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<train::Window> ws(static_cast<size_t>(n));
  for (train::Window& w : ws) {
    std::vector<int64_t> seq(static_cast<size_t>(T + 1));
    for (int64_t& t : seq) t = pick(rng);
    w.tokens.assign(seq.begin(), seq.end() - 1);
    w.targets.assign(seq.begin() + 1, seq.end());
  }
  return ws;
}

// max |a − b| / max |b| over one tensor (absolute when b is all zeros).
inline double tensor_err(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace k3::test
