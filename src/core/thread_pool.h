// The persistent worker pool behind parallel_for (core/parallel.h). Workers live for the
// process (no fork/join per op); between jobs they spin for about 50 µs (ops of one step
// follow each other faster than that) and then sleep on a futex, so an
// idle or background k3 costs nothing. A job is split into chunks that the caller and the
// workers claim one at a time, so a worker the OS has descheduled (a busy machine) leaves its
// share to the others instead of holding everyone up. Every chunk runs in the caller's
// floating-point mode (subnormals flushed or not: core/fp_env.h), so the bits a job computes do
// not depend on which thread took which chunk.
//
// On a machine where other processes compete for the cores, a worker can still be descheduled
// in the middle of a chunk and hold the caller up for a whole scheduler time slice. The pool
// notices such stalls (the caller waiting far longer than its own share took) and then runs
// jobs on the caller alone for a while, probing again later: on a loaded machine the default
// thread count is then no slower than one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace k3 {

class ThreadPool {
 public:
  using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);

  explicit ThreadPool(int n_threads);  // n_threads - 1 workers; the caller is the last one
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(ctx, b, e) over disjoint ranges covering [0, n) exactly once, on the workers and the
  // calling thread; returns when every range has run. The first exception thrown by fn is
  // rethrown here (the remaining ranges are skipped). Calls from inside a job, or from another
  // thread while a job runs, run serially on their caller.
  void run(int64_t n, RangeFn fn, void* ctx);

  // True on a pool worker thread (while it runs a job's ranges).
  static bool on_worker();

  // No worker is asleep on the futex (all spin or work): handing them a job costs no wake-up.
  bool workers_awake() const { return sleepers_.load(std::memory_order_relaxed) == 0; }

  // Jobs run serially because of detected stalls, and stalls detected (for tests and bench).
  int64_t serial_jobs() const { return serial_jobs_.load(); }
  int64_t stalls() const { return stalls_.load(); }

 private:
  void worker_loop();
  // Claims and runs chunks of job `gen` until none is left; returns the items it finished.
  void work_on(uint64_t gen);
  bool wait_for_job(uint32_t& seen);
  bool should_run_serially();
  void note_wait(double own_s, double wait_s);

  std::vector<std::thread> workers_;
  std::mutex run_mu_;  // one job at a time
  // The job: written by the caller before it publishes the job's generation in state_.
  RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  // Read by a worker before its claim (possibly while the caller already writes the next job's:
  // the claim then fails), hence atomic.
  std::atomic<int64_t> n_{0}, chunk_{1};
  std::atomic<uint32_t> fp_mode_{0};  // the caller's floating-point mode (core/fp_env.h)
  // [generation:24 | next index:40]: claiming a chunk is a CAS that also checks the
  // generation, so a late worker can never claim (or read) a newer job by mistake.
  std::atomic<uint64_t> state_{0};
  std::atomic<uint32_t> wake_{0};  // bumped per job; sleeping workers wait on it (futex)
  std::atomic<int> sleepers_{0};   // workers asleep on wake_ (or about to be)
  std::atomic<uint32_t> caller_sleeps_{0};
  std::atomic<int64_t> remaining_{0};  // items of the job not yet finished
  std::atomic<uint32_t> done_{0};      // 1 once remaining_ reaches 0 (the caller waits on it)
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;
  // Stall back-off (caller thread only, under run_mu_).
  int64_t serial_until_ = 0;  // steady_clock ticks until which jobs run on the caller alone
  int stall_score_ = 0;
  int64_t clean_jobs_ = 0;
  double backoff_s_ = 0.01;
  std::atomic<int64_t> serial_jobs_{0}, stalls_{0};
};

// The process-wide pool, sized by set_num_threads (default: K3_THREADS, else the physical
// cores this process may run on).
ThreadPool& thread_pool();
int physical_cores();

}  // namespace k3
