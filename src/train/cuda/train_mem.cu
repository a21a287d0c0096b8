// Device memory for the training pass: stream-ordered allocations from the backend's pool
// (which keeps freed blocks for reuse, so a step's buffers cost no driver calls after the
// first step), and the copies between host and device.
#include <string>

#include "backend/cuda/cuda.h"
#include "backend/cuda/runtime.cuh"
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

}  // namespace k3::train::gpu
