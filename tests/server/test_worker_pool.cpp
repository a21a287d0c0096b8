// The HTTP worker pool: grows a thread per waiting job up to its limit, queues beyond it, lets
// idle extra threads go, runs what is queued at shutdown; and the server's pool as /metrics
// shows it while clients hold connections.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "k3/error.h"
#include "server/worker_pool.h"

namespace k3::server {
namespace {

using namespace std::chrono_literals;

// Jobs that block until open() (a gate), counting how many started and finished.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool is_open = false;
  std::atomic<int> started{0}, finished{0};
  std::function<void()> job() {
    return [this] {
      ++started;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return is_open; });
      ++finished;
    };
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu);
    is_open = true;
    cv.notify_all();
  }
};

// Polls `done` every 5 ms for up to 10 s.
template <typename F>
bool eventually(F done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

TEST(WorkerPool, StartsSmallAndGrowsAThreadPerWaitingJob) {
  std::atomic<int64_t> live{-1};
  WorkerPool pool(2, 16, 10s, &live);
  EXPECT_EQ(pool.threads(), 2u);
  EXPECT_EQ(live, 2);
  Gate g;
  for (int i = 0; i < 11; ++i) pool.enqueue(g.job());
  ASSERT_TRUE(eventually([&] { return g.started == 11; })) << g.started;
  EXPECT_EQ(pool.threads(), 11u);  // every job got a thread of its own, none extra
  EXPECT_EQ(pool.busy(), 11u);
  EXPECT_EQ(live, 11);
  g.open();
  ASSERT_TRUE(eventually([&] { return g.finished == 11; }));
  EXPECT_EQ(pool.peak(), 11u);
  // Free threads are reused: one job at a time after that starts no thread.
  for (int i = 0; i < 20; ++i) {
    std::atomic<bool> ran{false};
    pool.enqueue([&] { ran = true; });
    ASSERT_TRUE(eventually([&] { return ran.load(); }));
  }
  EXPECT_EQ(pool.peak(), 11u);
}

TEST(WorkerPool, JobsBeyondTheLimitWaitForAFreeThread) {
  WorkerPool pool(0, 3, 10s);
  EXPECT_EQ(pool.threads(), 0u);
  Gate g;
  for (int i = 0; i < 5; ++i) pool.enqueue(g.job());
  ASSERT_TRUE(eventually([&] { return g.started == 3; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(g.started, 3);  // the other two wait: the limit holds
  EXPECT_EQ(pool.threads(), 3u);
  g.open();
  ASSERT_TRUE(eventually([&] { return g.finished == 5; }));
  EXPECT_EQ(pool.peak(), 3u);
}

TEST(WorkerPool, IdleExtraThreadsGoAndComeBackOnDemand) {
  std::atomic<int64_t> live{-1};
  WorkerPool pool(1, 8, 50ms, &live);
  Gate g;
  for (int i = 0; i < 6; ++i) pool.enqueue(g.job());
  ASSERT_TRUE(eventually([&] { return g.started == 6; }));
  g.open();
  ASSERT_TRUE(eventually([&] { return pool.threads() == 1; })) << pool.threads();
  EXPECT_EQ(live, 1);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(pool.threads(), 1u);  // never below the kept threads
  Gate again;
  for (int i = 0; i < 4; ++i) pool.enqueue(again.job());
  ASSERT_TRUE(eventually([&] { return again.started == 4; }));
  EXPECT_EQ(pool.threads(), 4u);
  again.open();
}

TEST(WorkerPool, ShutdownRunsWhatIsQueuedThenJoins) {
  std::atomic<int> ran{0};
  std::atomic<int64_t> live{-1};
  {
    WorkerPool pool(1, 1, 10s, &live);
    Gate g;
    pool.enqueue(g.job());
    for (int i = 0; i < 10; ++i) pool.enqueue([&] { ++ran; });
    ASSERT_TRUE(eventually([&] { return g.started == 1; }));
    std::thread opener([&] {
      std::this_thread::sleep_for(50ms);
      g.open();
    });
    pool.shutdown();  // waits for the blocked job, then the queue
    opener.join();
    EXPECT_EQ(ran, 10);
    EXPECT_EQ(pool.threads(), 0u);
    EXPECT_EQ(live, 0);
    pool.enqueue([&] { ++ran; });  // after shutdown: dropped, not run, no crash
  }
  EXPECT_EQ(ran, 10);
}

TEST(WorkerPool, BadLimitsAreRefused) {
  EXPECT_THROW(WorkerPool(0, 0, 1s), Error);
  EXPECT_THROW(WorkerPool(5, 4, 1s), Error);
}

}  // namespace
}  // namespace k3::server
