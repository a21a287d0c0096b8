// The backend contract: what a device must offer the engine. Memory (alloc/free), copies in
// every direction, a sync point, and supports_op(), from which placement and the op-by-op
// fallback to the CPU are decided. The CPU backend implements every op; a device backend
// (CUDA, a later issue) fills the `cuda` slot of the ops it runs. Model code never asks which
// backend it runs on: it calls ops with a Ctx, and the op dispatches.
#pragma once

#include <cstddef>
#include <string_view>

#include "backend/tensor.h"

namespace k3 {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual const char* name() const = 0;

  virtual void* alloc(size_t bytes) = 0;  // throws k3::Error when out of memory
  virtual void free(void* p) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void sync() = 0;  // waits for all queued work, copies started below included
  // Starts rows × width bytes towards the host, row r from src + r·spitch to dst + r·dpitch, once
  // the work queued so far is done, and returns: the copy overlaps the work queued after it
  // (a device copies on a second stream). src and dst must stay untouched until sync().
  // The CPU copies at once.
  virtual void copy_rows_to_host_async(void* dst, size_t dpitch, const void* src, size_t spitch,
                                       size_t width, size_t rows);
  // Sets `bytes` bytes of this backend's memory to zero (state slots of fresh sequences).
  virtual void zero(void* dst, size_t bytes);
  // Host memory this backend copies into directly (pinned on CUDA: a pageable destination goes
  // through the driver's staging buffers); plain host memory on the CPU.
  virtual void* alloc_host(size_t bytes);
  virtual void free_host(void* p);

  // Whether this backend has its own implementation of the op (by registry name).
  virtual bool supports_op(std::string_view op) const = 0;
};

// The process-wide CPU backend (host memory, the worker thread pool).
Backend& cpu_backend();

}  // namespace k3
