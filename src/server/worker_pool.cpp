#include "server/worker_pool.h"

#include <algorithm>

#include "k3/error.h"

namespace k3::server {

WorkerPool::WorkerPool(size_t min_threads, size_t max_threads,
                       std::chrono::milliseconds idle_timeout, std::atomic<int64_t>* live)
    : min_(min_threads), max_(max_threads), idle_timeout_(idle_timeout), live_(live) {
  check(max_threads >= 1, "the HTTP thread limit must be at least 1, got ", max_threads);
  check(min_threads <= max_threads, "the HTTP threads kept (", min_threads,
        ") must not exceed the limit (", max_threads, ")");
  std::lock_guard<std::mutex> lock(mu_);
  while (threads_.size() < min_) spawn_locked();
}

WorkerPool::~WorkerPool() { shutdown(); }

void WorkerPool::spawn_locked() {
  ++starting_;
  threads_.emplace_back([this] { work(); });
  peak_ = std::max(peak_, threads_.size());
  publish_locked();
}

void WorkerPool::publish_locked() {
  if (live_ != nullptr) *live_ = static_cast<int64_t>(threads_.size());
}

void WorkerPool::join_retired_locked() {
  // A retired worker has given up the lock for good: joining it here cannot deadlock.
  for (std::thread& t : retired_) t.join();
  retired_.clear();
}

void WorkerPool::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return;  // httplib stops accepting before it shuts the queue down
    join_retired_locked();
    jobs_.push_back(std::move(fn));
    // Every queued job needs a worker of its own on the way; grow while there are fewer.
    if (jobs_.size() > idle_ + starting_ && threads_.size() < max_) spawn_locked();
  }
  cv_.notify_one();
}

void WorkerPool::work() {
  std::unique_lock<std::mutex> lock(mu_);
  --starting_;
  for (;;) {
    ++idle_;
    const bool woken =
        cv_.wait_for(lock, idle_timeout_, [&] { return shutdown_ || !jobs_.empty(); });
    --idle_;
    if (!woken) {
      if (threads_.size() <= min_) continue;
      // Retire: move this thread's handle to retired_ for the next enqueue or shutdown to join.
      const auto self = std::find_if(threads_.begin(), threads_.end(), [](const std::thread& t) {
        return t.get_id() == std::this_thread::get_id();
      });
      retired_.splice(retired_.end(), threads_, self);
      publish_locked();
      return;
    }
    if (jobs_.empty()) return;  // shut down with nothing left to run
    std::function<void()> fn = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    fn();
    fn = nullptr;  // whatever the job captured goes before the worker counts as idle
    lock.lock();
  }
}

void WorkerPool::shutdown() {
  std::list<std::thread> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    all.splice(all.end(), threads_);
    all.splice(all.end(), retired_);
    publish_locked();
  }
  cv_.notify_all();
  for (std::thread& t : all) t.join();
}

size_t WorkerPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

size_t WorkerPool::peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

size_t WorkerPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size() - idle_ - starting_;
}

}  // namespace k3::server
