// parallel_for: the one way ops spread a loop over the worker threads (core/thread_pool.h).
// It runs the loop on the calling thread when the work is too small to pay for waking the
// workers, when only one thread is configured, or when already inside a parallel loop (a
// nested split would add the hand-off cost and no parallelism).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace k3 {

// Whether a job of `work` units is worth splitting: more than `min_awake` while the workers
// spin, more than `min_asleep` when one sleeps (waking it costs a futex call and, on a virtual
// machine, a cross-CPU interrupt: tens of µs, measured on the default model's decode).
inline bool worth_splitting(int64_t work, int64_t min_awake, int64_t min_asleep) {
  return work > min_awake && (work > min_asleep || thread_pool().workers_awake());
}

// fn(i) for i in [0, n), split in chunks over the pool when `worth_it`. Every index runs
// exactly once; an exception from fn is rethrown on the caller.
template <typename F>
void parallel_for(int64_t n, bool worth_it, F&& fn) {
  if (!worth_it || n < 2 || ThreadPool::on_worker()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  ThreadPool& pool = thread_pool();
  if (pool.size() == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto range = [&fn](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  };
  using Range = decltype(range);
  pool.run(
      n, [](void* c, int64_t b, int64_t e) { (*static_cast<Range*>(c))(b, e); }, &range);
}

}  // namespace k3
