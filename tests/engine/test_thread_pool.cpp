// The persistent thread pool behind parallel_for: coverage (every index exactly once), nesting,
// exceptions, every thread count, concurrent callers. Timings live in bench/, not here.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/fp_env.h"
#include "core/parallel.h"
#include "core/thread_pool.h"
#include "k3/k3.h"

namespace k3::test {
namespace {

// Runs [0, n) through the pool and checks each index ran exactly once.
void expect_each_index_once(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> bad_range{0};
  auto body = [&](int64_t b, int64_t e) {
    if (b < 0 || e > n || b >= e) ++bad_range;
    for (int64_t i = b; i < e; ++i) ++hits[i];
  };
  using Body = decltype(body);
  pool.run(
      n, [](void* c, int64_t b, int64_t e) { (*static_cast<Body*>(c))(b, e); }, &body);
  EXPECT_EQ(bad_range.load(), 0);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " index " << i;
}

TEST(ThreadPool, EveryIndexExactlyOnceForEveryThreadCount) {
  const int most = std::max(4, physical_cores() + 2);
  for (int threads = 1; threads <= most; ++threads) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000, 100003}) expect_each_index_once(pool, n);
    for (int rep = 0; rep < 200; ++rep) expect_each_index_once(pool, 1 + rep % 37);  // back to back
  }
}

TEST(ThreadPool, DestroyedBeforeItsWorkersStartedDoesNotHang) {
  // A worker that starts after the pool's stop request must still see it.
  for (int rep = 0; rep < 300; ++rep) {
    ThreadPool pool(2 + rep % 3);
    if (rep % 2) expect_each_index_once(pool, 5);
  }
}

TEST(ThreadPool, WorkRunsOnSeveralThreads) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> seen;
  // Each range waits a little so the workers (woken from sleep) get some of the work.
  for (int attempt = 0; attempt < 50 && seen.size() < 2; ++attempt) {
    auto body = [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard g(mu);
      seen.insert(std::this_thread::get_id());
    };
    using Body = decltype(body);
    pool.run(
        24, [](void* c, int64_t b, int64_t e) { (*static_cast<Body*>(c))(b, e); }, &body);
  }
  EXPECT_GE(seen.size(), 2u) << "every range ran on the caller";
}

TEST(ThreadPool, ExceptionIsRethrownOnTheCallerAndThePoolKeepsWorking) {
  ThreadPool pool(4);
  for (int64_t bad : {0, 17, 999}) {
    auto body = [&](int64_t b, int64_t e) {
      if (bad >= b && bad < e) throw std::runtime_error("index " + std::to_string(bad));
    };
    using Body = decltype(body);
    try {
      pool.run(
          1000, [](void* c, int64_t b, int64_t e) { (*static_cast<Body*>(c))(b, e); }, &body);
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "index " + std::to_string(bad));
    }
    expect_each_index_once(pool, 1000);
  }
}

TEST(ThreadPool, StallsSendJobsToTheCallerAloneAndResultsStayExact) {
  // Workers that take far longer than the caller (as a descheduled worker does) trip the
  // back-off: the following jobs run on the caller alone, still covering every index once.
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  auto slow_off_caller = [&](int64_t, int64_t) {  // 8 ranges: 0.1 ms on the caller, 5 off it
    const bool on_caller = std::this_thread::get_id() == caller;
    std::this_thread::sleep_for(std::chrono::microseconds(on_caller ? 100 : 5000));
  };
  using Slow = decltype(slow_off_caller);
  // Retried a few times: on a loaded machine the caller itself may sleep past the back-off.
  bool went_serial = false;
  for (int attempt = 0; attempt < 5 && !went_serial; ++attempt) {
    const int64_t stalls = pool.stalls();
    for (int rep = 0; rep < 200 && pool.stalls() == stalls; ++rep) {  // past any back-off
      pool.run(
          64, [](void* c, int64_t b, int64_t e) { (*static_cast<Slow*>(c))(b, e); },
          &slow_off_caller);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_GT(pool.stalls(), stalls) << "the workers never got a range, or no stall was seen";
    const int64_t serial_before = pool.serial_jobs();
    expect_each_index_once(pool, 1000);  // within the back-off
    went_serial = pool.serial_jobs() > serial_before;
  }
  EXPECT_TRUE(went_serial);
}

TEST(ParallelFor, CoversEveryIndexOnceAtEveryThreadCount) {
  const int saved = num_threads();
  for (int threads : {1, 2, 3, 5}) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    for (int64_t n : {0, 1, 2, 1000}) {
      for (bool worth_it : {false, true}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> out_of_range{0}, off_caller{0};
        const auto caller = std::this_thread::get_id();
        parallel_for(n, worth_it, [&](int64_t i) {
          off_caller += std::this_thread::get_id() != caller;
          ++(i >= 0 && i < n ? hits[i] : out_of_range);
        });
        EXPECT_EQ(out_of_range.load(), 0);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << worth_it;
        if (!worth_it || n < 2 || threads == 1) {
          EXPECT_EQ(off_caller.load(), 0) << n;  // ran on the caller
        }
      }
    }
  }
  set_num_threads(saved);
}

TEST(ParallelFor, NestedLoopsRunOnTheirCaller) {
  const int saved = num_threads();
  set_num_threads(4);
  std::atomic<int> bad{0};
  std::vector<std::atomic<int>> hits(64 * 50);
  parallel_for(64, true, [&](int64_t outer) {
    const auto me = std::this_thread::get_id();
    parallel_for(50, true, [&](int64_t inner) {
      bad += std::this_thread::get_id() != me;
      ++hits[outer * 50 + inner];
    });
  });
  EXPECT_EQ(bad.load(), 0);
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  set_num_threads(saved);
}

TEST(ParallelFor, ExceptionReachesTheCaller) {
  const int saved = num_threads();
  set_num_threads(3);
  EXPECT_THROW(parallel_for(500, true,
                            [](int64_t i) {
                              if (i == 250) throw std::invalid_argument("bad row");
                            }),
               std::invalid_argument);
  set_num_threads(saved);
}

TEST(ParallelFor, ConcurrentCallersEachGetTheirWholeLoop) {
  // Two application threads calling ops at once: one gets the pool, the other runs serially.
  const int saved = num_threads();
  set_num_threads(3);
  std::atomic<int> bad{0};
  auto caller = [&] {
    for (int rep = 0; rep < 100; ++rep) {
      std::vector<std::atomic<int>> hits(777);
      parallel_for(777, true, [&](int64_t i) { ++hits[i]; });
      for (auto& h : hits) bad += h.load() != 1;
    }
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(bad.load(), 0);
  set_num_threads(saved);
}

// Every chunk of a job runs in its caller's floating-point mode: subnormals flushed inside a
// FlushSubnormals scope on every thread that takes a chunk, kept (IEEE) outside it, whatever
// mode a worker's previous job left it in.
TEST(ParallelFor, ChunksRunInTheCallersFloatingPointMode) {
  if (kFlushSubnormals == 0) GTEST_SKIP() << "no subnormal flush on this architecture";
  const int saved = num_threads();
  set_num_threads(4);
  volatile float tiny = 1e-30f;  // volatile: the products below happen at run time
  auto run = [&](std::atomic<int>& flushed, std::atomic<int>& off_caller) {
    const auto caller = std::this_thread::get_id();
    parallel_for(4000, true, [&](int64_t) {
      const float product = tiny * 1e-10f;  // 1e-40: subnormal, or 0 when flushed
      flushed += product == 0.0f;
      off_caller += std::this_thread::get_id() != caller;
      std::this_thread::sleep_for(std::chrono::microseconds(2));  // let the workers take some
    });
  };
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<int> flushed{0}, off_caller{0};
    {
      const FlushSubnormals flush;
      run(flushed, off_caller);
    }
    EXPECT_EQ(flushed.load(), 4000) << rep;
    EXPECT_GT(off_caller.load(), 0) << rep;  // the workers took part
    std::atomic<int> flushed_after{0}, off_caller_after{0};
    run(flushed_after, off_caller_after);
    EXPECT_EQ(flushed_after.load(), 0) << rep;  // IEEE again, on the workers too
    EXPECT_GT(off_caller_after.load(), 0) << rep;
  }
  const float product = tiny * 1e-10f;
  EXPECT_GT(product, 0.0f);  // the caller's own mode restored
  set_num_threads(saved);
}

TEST(PhysicalCores, AtLeastOneAndAtMostTheLogicalCpus) {
  EXPECT_GE(physical_cores(), 1);
  EXPECT_LE(physical_cores(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace k3::test
