#include "engine/alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

// operator new[] forwards to operator new; the deletes match malloc with free. All out of
// line: inlined, GCC pairs malloc/free with new/delete and warns of a mismatch.
[[gnu::noinline]] void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace k3::test {
int64_t allocation_count() { return g_allocations.load(std::memory_order_relaxed); }
}  // namespace k3::test
