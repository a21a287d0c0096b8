#include "core/arena.h"

#include <algorithm>

namespace k3 {
namespace {
constexpr size_t kAlign = 64;
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

Arena::Arena(size_t initial_bytes, ArenaMemory memory) : memory_(memory) {
  if (initial_bytes > 0) chunks_.push_back(new_chunk(initial_bytes + kAlign));
}

Arena::~Arena() {
  for (Chunk& c : chunks_) {
    if (memory_.free != nullptr) {
      memory_.free(c.data, memory_.user);
    } else {
      delete[] c.data;
    }
  }
}

Arena::Chunk Arena::new_chunk(size_t size) {
  if (memory_.alloc != nullptr)
    return {static_cast<std::byte*>(memory_.alloc(size, memory_.user)), size};
  return {new std::byte[size], size};
}

void* Arena::alloc_bytes(size_t bytes) {
  bytes = round_up(std::max<size_t>(bytes, 1));
  // Walk the chunk list from the current position; each chunk is aligned on first use.
  for (; chunk_ < chunks_.size(); ++chunk_, offset_ = 0) {
    Chunk& c = chunks_[chunk_];
    const uintptr_t base = reinterpret_cast<uintptr_t>(c.data);
    const size_t start = round_up(base + offset_) - base;
    if (start + bytes <= c.size) {
      offset_ = start + bytes;
      return c.data + start;
    }
  }
  // Nothing fits: a new chunk at least as large as everything held so far (geometric growth).
  const size_t size = std::max(bytes, capacity()) + kAlign;
  chunks_.push_back(new_chunk(size));
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
