// Internal to the .cu files: the process's CUDA runtime (stream, cuBLAS handle, resident
// weights) and the argument helpers every launcher uses (see cuda.h for the pointer rules).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "backend/cuda/cuda.h"
#include "backend/cuda/graph.cuh"
#include "core/error.h"
#include "ops/linear/linear.h"

namespace k3::cuda {

void check_cuda(cudaError_t e, const char* what);
void check_blas(cublasStatus_t s, const char* what);
// After a kernel launch: reports a bad launch configuration at once (not at the next sync).
inline void check_launch(const char* op) { check_cuda(cudaGetLastError(), op); }

cudaStream_t stream();
// dst (device) = host[0, n) on the stream; host may be reused once this returns (small copies
// go through a pinned ring, so the stream does not drain first as for pageable memory).
void copy_in_async(void* dst, const void* host, size_t n, const char* what);
cublasHandle_t blas();
int sm_count();  // multiprocessors of the device

// cuBLAS is opened at first use (dlopen), not linked: its libraries take a fifth of a second
// to load, which every test process of a CUDA build would pay even with no device.
// The C entry point cublasGemmEx (C++ also sees a deprecated overload).
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);
struct BlasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetStream_v2) set_stream;
  GemmExFn gemm_ex;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
};
const BlasApi& blas_api();
bool host_staging();
// The device copy of a resident host address, or p itself when it is not resident.
const void* resident(const void* p);
// Changes whenever a resident range is added or released (device tables of translated weight
// pointers stay valid while it does not).
uint64_t resident_generation();

// Stream-ordered device scratch, freed on the stream when the holder goes.
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(size_t bytes);
  ~Scratch();
  Scratch(Scratch&& o) noexcept : p_(o.p_), graph_(o.graph_) { o.p_ = nullptr; }
  Scratch& operator=(Scratch&& o) noexcept {  // what this held is freed (in order) with o
    std::swap(p_, o.p_);
    std::swap(graph_, o.graph_);
    return *this;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  bool graph_ = false;  // from a graphed step's scratch stack (graph.cuh)
};

// A host array copied to fresh device scratch (indices, tables, pointer lists).
// In a graphed step the kernels read it from the table slab's device mirror instead.
template <typename T>
const T* upload(const T* host, size_t n, std::vector<Scratch>& keep) {
  if (n == 0) return nullptr;
  if (graph_mode() != GraphMode::off)
    return static_cast<const T*>(graph_table(host, n * sizeof(T)));
  keep.emplace_back(n * sizeof(T));
  copy_in_async(keep.back().get(), host, n * sizeof(T), "upload");
  return static_cast<const T*>(keep.back().get());
}

// One launch's pointer arguments. Normally in() translates resident weights and passes
// activations through; in host-staging mode every argument is copied to the device and the
// outputs are copied back (and the stream synchronised) when the Args goes.
class Args {
 public:
  Args() : staging_(host_staging()) {}
  ~Args();
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;

  template <typename T>
  const T* in(const T* p, size_t n) {
    if (p == nullptr) return nullptr;
    if (!staging_) return static_cast<const T*>(resident(p));
    const void* r = resident(p);
    if (r != p) return static_cast<const T*>(r);
    return upload(p, n, keep_);
  }
  template <typename T>
  T* out(T* p, size_t n) {
    return staged(p, n, false);
  }
  template <typename T>
  T* inout(T* p, size_t n) {
    return staged(p, n, true);
  }
  // A host array (always copied).
  template <typename T>
  const T* host_array(const T* p, size_t n) {
    return upload(p, n, keep_);
  }
  bool staging() const { return staging_; }
  std::vector<Scratch>& keep() { return keep_; }

 private:
  template <typename T>
  T* staged(T* p, size_t n, bool copy_in) {
    if (!staging_ || p == nullptr || n == 0) return p;
    keep_.emplace_back(n * sizeof(T));
    void* d = keep_.back().get();
    if (copy_in) {
      check_cuda(cudaMemcpyAsync(d, p, n * sizeof(T), cudaMemcpyHostToDevice, stream()),
                 "stage in");
    }
    outs_.push_back({p, d, n * sizeof(T)});
    return static_cast<T*>(d);
  }
  struct Out {
    void* host;
    const void* dev;
    size_t bytes;
  };
  bool staging_;
  std::vector<Scratch> keep_;
  std::vector<Out> outs_;
};

// y [T, w.rows] = x [T, w.cols] · Wᵀ with every pointer (W's included) on the device.
void linear_device(const float* x, int64_t T, const Mat& w, float* y);
// W with its data and scales translated through a (resident weights, or staged).
Mat device_mat(Args& a, const Mat& w);

inline int blocks_for(int64_t n, int threads) {
  return static_cast<int>((n + threads - 1) / threads);
}

}  // namespace k3::cuda
