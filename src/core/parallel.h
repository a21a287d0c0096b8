// parallel_for: the one way ops spread a loop over the OpenMP threads. It runs the loop on the
// calling thread when the work is too small to pay for a fork/join, when only one thread is
// configured, or when already inside a parallel region (a nested region would add the fork/join
// cost and no parallelism). Decode steps call hundreds of tiny ops, so skipping the runtime
// call entirely matters (an `omp parallel if(false)` still enters libgomp).
#pragma once

#include <omp.h>

#include <cstdint>

namespace k3 {

// fn(i) for i in [0, n), statically split over the team when `worth_it`.
template <typename F>
void parallel_for(int64_t n, bool worth_it, F&& fn) {
  if (!worth_it || n < 2 || omp_in_parallel() || omp_get_max_threads() == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

}  // namespace k3
