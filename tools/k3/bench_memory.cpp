#include "bench_memory.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace k3::cli {

double weight_bytes_per_token(const CheckpointSummary& ckpt, int64_t batch) {
  const MoeHParams& moe = ckpt.hparams.moe;
  const double touched =
      moe.n_expert > 0 ? 1.0 - std::pow(1.0 - static_cast<double>(moe.n_used) / moe.n_expert, batch)
                       : 0.0;
  double step = 0;
  for (const TensorSummary& t : ckpt.tensors) {
    if (t.role == "embedding" && !t.shape.empty() && t.shape[0] > 0) {
      step += static_cast<double>(t.bytes) / t.shape[0] * batch;  // one row per token
    } else if (t.role == "moe routed experts") {
      step += touched * static_cast<double>(t.bytes);
    } else {
      step += static_cast<double>(t.bytes);
    }
  }
  return step / static_cast<double>(batch);
}

namespace {

// Sums n words with eight independent accumulators (no dependency chain limits the loads).
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  for (; i < n; ++i) a[0] += p[i];
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}

}  // namespace

double read_bandwidth(int threads, size_t bytes, int repeats) {
  threads = std::max(1, threads);
  const size_t words = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[words]);
  const size_t per = (words + threads - 1) / threads;
  auto each_thread = [&](auto&& work) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      const size_t lo = std::min(words, t * per), hi = std::min(words, lo + per);
      pool.emplace_back([&, lo, hi] { work(lo, hi); });
    }
    for (auto& th : pool) th.join();
  };
  // First touch by the reading threads: pages land where they are read.
  each_thread([&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) buf[i] = i;
  });
  double best = 0;
  std::vector<uint64_t> sink(static_cast<size_t>(threads));
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    each_thread([&](size_t lo, size_t hi) {
      sink[lo / std::max<size_t>(per, 1)] = sum_words(&buf[lo], hi - lo);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / s);
  }
  volatile uint64_t keep = 0;  // the sums are used, so the loads are not optimised away
  for (uint64_t v : sink) keep = keep + v;
  return best;
}

}  // namespace k3::cli
