// The process-wide thread pool and its size (k3::set_num_threads / num_threads).
#include <cstdlib>
#include <memory>
#include <mutex>

#include "core/thread_pool.h"
#include "k3/k3.h"

namespace k3 {
namespace {

// K3_THREADS, else the physical cores (hyper-thread siblings share one core's FMA units, so
// running on them only adds contention).
int default_threads() {
  if (const char* s = std::getenv("K3_THREADS")) {
    const int n = std::atoi(s);
    if (n > 0) return n;
  }
  return physical_cores();
}

std::mutex g_pool_mu;
ThreadPool* g_pool = nullptr;  // never freed: workers may still be asleep at exit

}  // namespace

ThreadPool& thread_pool() {
  static ThreadPool* const first = [] {
    std::lock_guard g(g_pool_mu);
    if (g_pool == nullptr) g_pool = new ThreadPool(default_threads());
    return g_pool;
  }();
  (void)first;
  return *g_pool;
}

// Not while ops run on other threads (the old pool is joined and replaced).
void set_num_threads(int n) {
  if (n <= 0) return;
  std::lock_guard g(g_pool_mu);
  if (g_pool != nullptr && g_pool->size() == n) return;
  delete g_pool;
  g_pool = new ThreadPool(n);
}

int num_threads() { return thread_pool().size(); }

}  // namespace k3
