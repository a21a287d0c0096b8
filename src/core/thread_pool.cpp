#include "core/thread_pool.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "core/fp_env.h"

namespace k3 {
namespace {

constexpr int kIndexBits = 40;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
constexpr uint64_t kGenMask = (uint64_t{1} << (64 - kIndexBits)) - 1;
constexpr double kSpinSeconds = 50e-6;  // spin this long before sleeping on the futex
// A wait for the other threads longer than the caller's own share plus this is a stall
// (a descheduled worker), not an uneven split.
constexpr double kStallSlackSeconds = 200e-6;
constexpr double kMinBackoffSeconds = 0.01, kMaxBackoffSeconds = 1.0;

thread_local bool t_in_job = false;  // this thread is running a job's ranges

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until pred() or kSpinSeconds have passed; returns pred().
template <typename Pred>
bool spin_until(Pred pred) {
  const Clock::time_point t0 = Clock::now();
  for (int i = 0;; ++i) {
    if (pred()) return true;
    cpu_relax();
    if ((i & 63) == 63 && seconds(Clock::now() - t0) > kSpinSeconds) return pred();
  }
}

// Sleeps while *word == expected (the kernel checks atomically; spurious wake-ups are fine:
// callers loop). Wakes every sleeper on word. (std::atomic::wait in GCC 12's libstdc++ lost a
// wake-up here, so the futex is used directly.)
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

struct InJob {  // marks the thread as inside a job (nested parallel_for runs serially)
  InJob() { t_in_job = true; }
  ~InJob() { t_in_job = false; }
};

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  for (int i = 1; i < std::max(1, n_threads); ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  wake_.fetch_add(1);
  futex_wake_all(wake_);
  for (std::thread& t : workers_) t.join();
}

bool ThreadPool::on_worker() { return t_in_job; }

void ThreadPool::run(int64_t n, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  if (workers_.empty() || t_in_job || n >= static_cast<int64_t>(kIndexMask)) {
    fn(ctx, 0, n);
    return;
  }
  std::unique_lock lock(run_mu_, std::try_to_lock);
  if (!lock.owns_lock() || should_run_serially()) {  // another thread's job, or backing off
    if (lock.owns_lock()) lock.unlock();
    const InJob serial;  // nested loops inside fn run serially too
    fn(ctx, 0, n);
    return;
  }
  const uint64_t gen = ((state_.load(std::memory_order_relaxed) >> kIndexBits) + 1) & kGenMask;
  // Close the previous job before its fields change: a late worker that read its state could
  // otherwise pair that state with the new n_ and claim a chunk "of the old job" that lies in
  // the new one (ranges run twice, remaining_ reaching 0 early; seen on 16 cores). Its claim is
  // a CAS on the old generation, which fails from here on; the closed index is >= any n.
  state_.store((gen << kIndexBits) | kIndexMask);
  fn_ = fn;
  ctx_ = ctx;
  fp_mode_.store(fp_mode(), std::memory_order_release);
  n_.store(n, std::memory_order_release);  // release/acquire: a worker that sees the new n_
  chunk_.store(std::max<int64_t>(1, n / (4 * static_cast<int64_t>(size()))),
               std::memory_order_release);  // also sees the closed state in its claim
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  remaining_.store(n, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  state_.store(gen << kIndexBits, std::memory_order_release);  // publishes the fields above
  wake_.fetch_add(1);                               // seq_cst: pairs with the sleepers' count
  if (sleepers_.load() > 0) futex_wake_all(wake_);  // no system call while workers spin

  const Clock::time_point t0 = Clock::now();
  work_on(gen);
  const Clock::time_point t1 = Clock::now();
  auto finished = [this] { return done_.load(std::memory_order_acquire) != 0; };
  if (!spin_until(finished)) {
    caller_sleeps_.store(1);
    while (!finished()) futex_wait(done_, 0);
    caller_sleeps_.store(0);
  }
  note_wait(seconds(t1 - t0), seconds(Clock::now() - t1));
  if (failed_.load(std::memory_order_acquire)) {
    std::exception_ptr e;
    {
      std::lock_guard g(error_mu_);
      e = std::exchange(error_, nullptr);
    }
    std::rethrow_exception(e);
  }
}

void ThreadPool::work_on(uint64_t gen) {
  const InJob in_job;
  for (;;) {
    uint64_t s = state_.load(std::memory_order_acquire);
    if ((s >> kIndexBits) != gen) return;
    // Read before the claim; valid because a successful claim below proves the job (and
    // so these fields) was still this generation's.
    const int64_t n = n_.load(std::memory_order_acquire);
    const int64_t chunk = chunk_.load(std::memory_order_acquire);
    const uint32_t mode = fp_mode_.load(std::memory_order_acquire);
    const int64_t begin = static_cast<int64_t>(s & kIndexMask);
    if (begin >= n) return;
    const int64_t end = std::min(n, begin + chunk);
    if (!state_.compare_exchange_weak(s, (gen << kIndexBits) | static_cast<uint64_t>(end),
                                      std::memory_order_acq_rel, std::memory_order_relaxed))
      continue;
    set_fp_mode(mode);  // a no-op on the caller, and on a worker whose last job had this mode
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        fn_(ctx_, begin, end);
      } catch (...) {
        std::lock_guard g(error_mu_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_release);
      }
    }
    if (remaining_.fetch_sub(end - begin, std::memory_order_acq_rel) == end - begin) {
      done_.store(1);
      if (caller_sleeps_.load() != 0) futex_wake_all(done_);
    }
  }
}

bool ThreadPool::wait_for_job(uint32_t& seen) {
  auto changed = [&] { return wake_.load(std::memory_order_acquire) != seen; };
  if (!spin_until(changed)) {
    sleepers_.fetch_add(1);  // seq_cst, before the last check of wake_
    while (!changed()) futex_wait(wake_, seen);
    sleepers_.fetch_sub(1);
  }
  seen = wake_.load(std::memory_order_acquire);
  return !stop_.load();
}

void ThreadPool::worker_loop() {
  // From wake_'s initial value, not its value now: a worker that starts late must still see the
  // stop request of a pool destroyed before it ran (and merely joins any job under way).
  uint32_t seen = 0;
  while (wait_for_job(seen)) work_on(state_.load(std::memory_order_acquire) >> kIndexBits);
}

bool ThreadPool::should_run_serially() {
  if (serial_until_ == 0) return false;
  if (Clock::now().time_since_epoch().count() < serial_until_) {
    serial_jobs_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  serial_until_ = 0;  // the back-off is over: probe with the workers again
  return false;
}

void ThreadPool::note_wait(double own_s, double wait_s) {
  if (wait_s <= own_s + kStallSlackSeconds) {
    if (stall_score_ > 0) --stall_score_;
    if (++clean_jobs_ > 4096) backoff_s_ = kMinBackoffSeconds;  // a quiet machine again
    return;
  }
  clean_jobs_ = 0;
  if (++stall_score_ < 2) return;
  // Two stalls close together: run on the caller alone for a while, longer each time the
  // probe afterwards stalls again.
  stall_score_ = 0;
  stalls_.fetch_add(1, std::memory_order_relaxed);
  const auto until = Clock::now() + std::chrono::duration<double>(backoff_s_);
  serial_until_ = std::chrono::time_point_cast<Clock::duration>(until).time_since_epoch().count();
  backoff_s_ = std::min(kMaxBackoffSeconds, 2 * backoff_s_);
}

int physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    return std::max(1u, std::thread::hardware_concurrency());
  }
  std::set<std::pair<std::string, std::string>> cores;  // (package, core) of allowed CPUs
  int allowed = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    ++allowed;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream pkg(dir + "physical_package_id"), core(dir + "core_id");
    std::string p, c;
    if (!(pkg >> p) || !(core >> c)) return allowed > 0 ? CPU_COUNT(&set) : 1;  // no topology
    cores.insert({p, c});
  }
  return std::max<int>(1, static_cast<int>(cores.size()));
}

}  // namespace k3
