// Device memory for the training pass: stream-ordered allocations from the backend's pool
// (which keeps freed blocks for reuse, so a step's buffers cost no driver calls after the
// first step), and the copies between host and device.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda.h"
#include "backend/cuda/runtime.cuh"
#include "core/error.h"
#include "train/cuda/train_ops.h"

namespace k3::train::gpu {

using cuda::check_cuda;
using cuda::stream;

bool available() { return cuda_available(); }

void* dev_alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, stream());
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls can report their own
    throw Error("training on the GPU: cannot allocate " + std::to_string(bytes >> 20) +
                " MiB of device memory (" + cudaGetErrorString(e) +
                "); lower --batch or --seq-len");
  }
  return p;
}

void dev_free(void* p) {
  if (p != nullptr) cudaFreeAsync(p, stream());
}

void to_dev(void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream()), "to_dev");
  check_cuda(cudaStreamSynchronize(stream()), "to_dev");
}

void to_host(void* host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream()), "to_host");
  check_cuda(cudaStreamSynchronize(stream()), "to_host");
}

void dev_zero(void* p, size_t bytes) {
  if (bytes != 0) check_cuda(cudaMemsetAsync(p, 0, bytes, stream()), "dev_zero");
}

void dev_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), "dev_copy");
}

void sync() { check_cuda(cudaStreamSynchronize(stream()), "training step"); }

// Pinned blocks are told apart from the fallback's by a one-word header before the data.
namespace {
constexpr size_t kHeader = 64;  // keeps the data 64-byte aligned
constexpr uint64_t kPinned = 0x70696e6e6564, kPlain = 0x706c61696e;
}  // namespace

void* host_alloc_pinned(size_t bytes) {
  void* p = nullptr;
  uint64_t kind = kPinned;
  if (cudaHostAlloc(&p, bytes + kHeader, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it so later calls report their own
    p = std::malloc(bytes + kHeader);
    check(p != nullptr, "training on the GPU: cannot allocate ", bytes >> 20,
          " MiB of host memory");
    kind = kPlain;
  }
  *static_cast<uint64_t*>(p) = kind;
  return static_cast<char*>(p) + kHeader;
}

void host_free_pinned(void* data) {
  if (data == nullptr) return;
  void* p = static_cast<char*>(data) - kHeader;
  if (*static_cast<uint64_t*>(p) == kPinned) {
    cudaFreeHost(p);
  } else {
    std::free(p);
  }
}

}  // namespace k3::train::gpu
