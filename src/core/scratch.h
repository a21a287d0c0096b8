// Per-thread kernel scratch that grows to its high-water mark and is then reused. Kernels call
// it inside parallel regions (one buffer per OS thread and Tag), so once a step of a given
// shape has run, later steps allocate nothing. Use a distinct Tag for each buffer a kernel
// holds at the same time.
#pragma once

#include <cstddef>
#include <vector>

namespace k3 {

template <typename T, typename Tag>
T* thread_scratch(size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace k3
