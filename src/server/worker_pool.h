// The HTTP worker pool behind k3 serve. cpp-httplib hands every accepted connection to a
// TaskQueue and the connection holds its thread for its whole life (a streamed answer, then
// keep-alive), so the pool bounds how many clients are served at once. A fixed pool sized for
// the worst case (--parallel + --queue + 16 threads) idles hundreds of threads on a quiet
// server; this one starts `min_threads`, adds a thread whenever a connection arrives and no
// thread is free (up to `max_threads`; beyond that connections wait in the queue), and retires
// a thread above `min_threads` once it has been idle for `idle_timeout`.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace k3::server {

class WorkerPool : public httplib::TaskQueue {
 public:
  // Throws k3::Error unless 1 <= max_threads and min_threads <= max_threads. `live`, when
  // given, follows the number of live threads (a /metrics gauge that outlives the pool).
  WorkerPool(size_t min_threads, size_t max_threads, std::chrono::milliseconds idle_timeout,
             std::atomic<int64_t>* live = nullptr);
  ~WorkerPool() override;  // shuts down (runs what is queued) if shutdown() was not called
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs the queued jobs, then joins every thread

  size_t threads() const;  // live threads now
  size_t peak() const;     // the most live threads so far
  size_t busy() const;     // live threads not waiting for a job

 private:
  void work();
  void spawn_locked();
  void join_retired_locked();
  void publish_locked();

  const size_t min_, max_;
  const std::chrono::milliseconds idle_timeout_;
  std::atomic<int64_t>* const live_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_, as everything below
  std::list<std::thread> threads_;          // live workers
  std::list<std::thread> retired_;          // workers that have left their loop, to join
  size_t idle_ = 0;                         // workers waiting for a job
  size_t starting_ = 0;                     // workers started, not yet waiting
  size_t peak_ = 0;
  bool shutdown_ = false;
};

}  // namespace k3::server
