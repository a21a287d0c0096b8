// A bump allocator for the tensors of one step. Allocation is a pointer bump inside a chunk;
// mark()/rewind() release everything allocated after the mark (a layer's temporaries), and
// reset() releases all. Chunks are kept for reuse, so once a step of a given shape has run,
// later steps of that shape (or smaller) never touch the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace k3 {

// Where an arena's chunks come from: host memory by default, or a device's (the CUDA step
// arena), through these two calls.
struct ArenaMemory {
  void* (*alloc)(size_t bytes, void* user) = nullptr;
  void (*free)(void* p, void* user) = nullptr;
  void* user = nullptr;
};

class Arena {
 public:
  struct Mark {
    size_t chunk = 0, offset = 0;
  };

  explicit Arena(size_t initial_bytes = size_t{1} << 20, ArenaMemory memory = {});
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // n uninitialised elements, 64-byte aligned.
  template <typename T>
  T* alloc(size_t n) {
    return static_cast<T*>(alloc_bytes(n * sizeof(T)));
  }
  void* alloc_bytes(size_t bytes);

  Mark mark() const { return {chunk_, offset_}; }
  void rewind(Mark m) {
    chunk_ = m.chunk;
    offset_ = m.offset;
  }
  void reset() { rewind({}); }

  size_t capacity() const;  // bytes held in all chunks

 private:
  struct Chunk {
    std::byte* data = nullptr;
    size_t size = 0;
  };
  Chunk new_chunk(size_t size);
  ArenaMemory memory_;
  std::vector<Chunk> chunks_;
  size_t chunk_ = 0, offset_ = 0;
};

// Releases an arena's allocations made in this scope.
class ArenaScope {
 public:
  explicit ArenaScope(Arena& a) : arena_(a), mark_(a.mark()) {}
  ~ArenaScope() { arena_.rewind(mark_); }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  Arena& arena_;
  Arena::Mark mark_;
};

}  // namespace k3
