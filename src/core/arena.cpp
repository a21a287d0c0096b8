#include "core/arena.h"

#include <algorithm>

namespace k3 {
namespace {
constexpr size_t kAlign = 64;
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

Arena::Arena(size_t initial_bytes) {
  if (initial_bytes > 0) {
    chunks_.push_back({std::make_unique_for_overwrite<std::byte[]>(initial_bytes + kAlign),
                       initial_bytes + kAlign});
  }
}

void* Arena::alloc_bytes(size_t bytes) {
  bytes = round_up(std::max<size_t>(bytes, 1));
  // Walk the chunk list from the current position; each chunk is aligned on first use.
  for (; chunk_ < chunks_.size(); ++chunk_, offset_ = 0) {
    Chunk& c = chunks_[chunk_];
    const uintptr_t base = reinterpret_cast<uintptr_t>(c.data.get());
    const size_t start = round_up(base + offset_) - base;
    if (start + bytes <= c.size) {
      offset_ = start + bytes;
      return c.data.get() + start;
    }
  }
  // Nothing fits: a new chunk at least as large as everything held so far (geometric growth).
  const size_t size = std::max(bytes, capacity()) + kAlign;
  chunks_.push_back({std::make_unique_for_overwrite<std::byte[]>(size), size});
  chunk_ = chunks_.size() - 1;
  offset_ = 0;
  return alloc_bytes(bytes);
}

size_t Arena::capacity() const {
  size_t n = 0;
  for (const Chunk& c : chunks_) n += c.size;
  return n;
}

}  // namespace k3
