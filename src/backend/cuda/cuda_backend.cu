// The CUDA backend: device memory, copies on the process's stream, resident weights, and the
// runtime the launchers share (runtime.cuh).
#include <dlfcn.h>

#include <cstring>
#include <map>
#include <mutex>

#include "backend/cuda/runtime.cuh"
#include "ops/registry.h"

namespace k3 {
namespace cuda {
namespace {

struct Resident {
  size_t bytes;
  void* dev;
  int64_t refs;
};

struct Runtime {
  cudaStream_t stream = nullptr;
  cudaStream_t copy_stream = nullptr;  // device-to-host copies that overlap the main stream
  cudaEvent_t queued = nullptr;        // marks the main stream's work before such a copy
  cudaEvent_t copied = nullptr;        // marks those copies (a graph capture joins on it)
  bool forked = false;                 // a capture has copies on copy_stream not joined yet
  cublasHandle_t blas = nullptr;
  std::mutex mu;
  std::map<uintptr_t, Resident> resident;  // host start -> device copy
  size_t resident_bytes = 0;
  uint64_t resident_generation = 0;  // bumped whenever a range is added or removed

  Runtime() {
    check_cuda(cudaSetDevice(0), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), "cudaEventCreate");
    // Keep freed scratch in the stream-ordered pool instead of returning it at every sync.
    cudaMemPool_t pool = nullptr;
    check_cuda(cudaDeviceGetDefaultMemPool(&pool, 0), "default mempool");
    uint64_t keep = UINT64_MAX;
    check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
               "mempool threshold");
    check_blas(blas_api().create(&blas), "cublasCreate");
    check_blas(blas_api().set_stream(blas, stream), "cublasSetStream");
    // A workspace of its own, so captured GEMMs (graphed steps) never allocate one.
    void* ws = nullptr;
    check_cuda(cudaMalloc(&ws, kBlasWorkspace), "cublas workspace");
    check_blas(blas_api().set_workspace(blas, ws, kBlasWorkspace), "cublasSetWorkspace");
  }
  static constexpr size_t kBlasWorkspace = size_t{32} << 20;
  // Never destroyed: kernels may still be queued at exit, and the driver frees everything.
};

// Small host arrays go to the device through a pinned ring. A copy from pageable memory makes
// the stream drain first (CUDA's rule for pageable host-to-device copies), which left the GPU
// idle at every table a decode step uploads while the host caught up. The ring is two halves;
// before a half is reused, the event recorded when it was last left has completed (every copy
// out of it has run).
class PinnedRing {
 public:
  static constexpr size_t kHalf = size_t{4} << 20;
  static constexpr size_t kMaxCopy = 64 << 10;  // larger copies stay pageable

  // A pinned copy of host[0, n) to copy from on the stream, or nullptr.
  const void* stage(const void* host, size_t n, cudaStream_t st) {
    if (n > kMaxCopy) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    if (base_ == nullptr) {
      check_cuda(cudaHostAlloc(reinterpret_cast<void**>(&base_), 2 * kHalf, cudaHostAllocDefault),
                 "pinned ring");
      for (cudaEvent_t& e : left_) {
        check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "pinned ring event");
      }
    }
    const size_t need = (n + 255) / 256 * 256;
    if (off_ + need > kHalf) {
      check_cuda(cudaEventRecord(left_[half_], st), "pinned ring");
      half_ ^= 1;
      if (used_[half_]) check_cuda(cudaEventSynchronize(left_[half_]), "pinned ring");
      off_ = 0;
    }
    used_[half_] = true;
    char* p = base_ + half_ * kHalf + off_;
    off_ += need;
    std::memcpy(p, host, n);
    return p;
  }

 private:
  std::mutex mu_;
  char* base_ = nullptr;
  cudaEvent_t left_[2] = {};
  bool used_[2] = {false, false};
  int half_ = 0;
  size_t off_ = 0;
};

PinnedRing& pinned_ring() {
  static PinnedRing* r = new PinnedRing();  // never destroyed (copies may be queued at exit)
  return *r;
}

bool g_staging = false;  // set by the op harness only; no device needed to set it

Runtime& runtime() {
  static Runtime* rt = new Runtime();
  return *rt;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

}  // namespace

void check_cuda(cudaError_t e, const char* what) {
  check(e == cudaSuccess, "cuda: ", what, ": ", cudaGetErrorString(e));
}

void check_blas(cublasStatus_t s, const char* what) {
  check(s == CUBLAS_STATUS_SUCCESS, "cublas: ", what, ": status ", static_cast<int>(s));
}

// libcublas from the loader's search path, else the toolkit this was built with.
void* open_cublas() {
  for (const char* name : {"libcublas.so.13", "libcublas.so", K3_CUDA_LIB_DIR "/libcublas.so.13",
                           "/usr/local/cuda/lib64/libcublas.so.13"}) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
  }
  fail("cuda: cannot load libcublas.so.13 (", dlerror(), "); add the CUDA toolkit's lib64 to ",
       "LD_LIBRARY_PATH");
}

template <typename F>
F symbol(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  check(p != nullptr, "cuda: libcublas has no ", name);
  return reinterpret_cast<F>(p);
}

const BlasApi& blas_api() {
  static const BlasApi api = [] {
    void* lib = open_cublas();
    return BlasApi{symbol<decltype(&cublasCreate_v2)>(lib, "cublasCreate_v2"),
                   symbol<decltype(&cublasSetStream_v2)>(lib, "cublasSetStream_v2"),
                   symbol<GemmExFn>(lib, "cublasGemmEx"),
                   symbol<decltype(&cublasSgemm_v2)>(lib, "cublasSgemm_v2"),
                   symbol<decltype(&cublasSetWorkspace_v2)>(lib, "cublasSetWorkspace_v2"),
                   symbol<decltype(&cublasSgemmStridedBatched)>(lib, "cublasSgemmStridedBatched")};
  }();
  return api;
}

cudaStream_t stream() { return runtime().stream; }
void forget_forks() { runtime().forked = false; }

void copy_in_async(void* dst, const void* host, size_t n, const char* what) {
  if (n == 0) return;
  if (graph_mode() != GraphMode::off) {  // from the table slab's mirror, inside the graph
    const void* src = graph_table(host, n);
    if (gate_call(what, dst, src, n)) {
      check_cuda(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream()), what);
    }
    return;
  }
  const void* src = pinned_ring().stage(host, n, stream());
  check_cuda(cudaMemcpyAsync(dst, src != nullptr ? src : host, n, cudaMemcpyHostToDevice, stream()),
             what);
}
cublasHandle_t blas() { return runtime().blas; }

int sm_count() {
  static int n = 0;
  if (n == 0) {
    int dev = 0;
    check_cuda(cudaGetDevice(&dev), "device");
    check_cuda(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev), "sm count");
  }
  return n;
}
bool host_staging() { return g_staging; }

const void* resident(const void* p) {
  Runtime& rt = runtime();
  if (rt.resident.empty()) return p;
  const auto key = reinterpret_cast<uintptr_t>(p);
  auto it = rt.resident.upper_bound(key);
  if (it == rt.resident.begin()) return p;
  --it;
  if (key >= it->first + it->second.bytes) return p;
  return static_cast<const char*>(it->second.dev) + (key - it->first);
}

uint64_t resident_generation() {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  return rt.resident_generation;
}

Scratch::Scratch(size_t bytes) {
  if (graph_mode() != GraphMode::off) {
    p_ = graph_alloc(bytes);
    graph_ = true;
    return;
  }
  check_cuda(cudaMallocAsync(&p_, bytes == 0 ? 1 : bytes, stream()), "scratch alloc");
}
Scratch::~Scratch() {
  if (p_ == nullptr) return;
  if (graph_) {
    graph_free(p_);
  } else {
    cudaFreeAsync(p_, stream());
  }
}

Args::~Args() {
  if (!staging_) return;
  for (const Out& o : outs_) {
    cudaMemcpyAsync(o.host, o.dev, o.bytes, cudaMemcpyDeviceToHost, stream());
  }
  cudaStreamSynchronize(stream());
}

}  // namespace cuda

namespace {

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::cuda; }
  const char* name() const override { return "cuda"; }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (e != cudaSuccess) cudaGetLastError();
    check(e == cudaSuccess, "cuda backend: out of device memory allocating ", bytes, " bytes (",
          cudaGetErrorString(e), ")");
    return p;
  }
  // A graph's copies name the memory they were captured with: a later allocation at the same
  // address would pass the dry run's check but not the driver's, so frees drop every graph.
  void free(void* p) override {
    if (p != nullptr) {
      cuda_drop_graphs();
      cudaFree(p);
    }
  }
  void copy_to_device(void* dst, const void* src, size_t n) override {
    cuda::copy_in_async(dst, src, n, "copy to device");
  }
  // In a graphed step the copies join the graph, and the sync waits for the graph instead.
  void copy_to_host(void* dst, const void* src, size_t n) override {
    if (cuda::gate_call("copy to host", dst, src, n)) {
      cuda::check_cuda(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, cuda::stream()),
                       "copy to host");
    }
    sync();
  }
  void copy_on_device(void* dst, const void* src, size_t n) override {
    if (!cuda::gate_call("copy on device", dst, src, n)) return;
    cuda::check_cuda(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, cuda::stream()),
                     "copy on device");
  }
  void zero(void* dst, size_t n) override { cuda::memset_async(dst, 0, n, "memset"); }
  void sync() override {
    cuda::Runtime& rt = cuda::runtime();
    if (cuda::graph_mode() == cuda::GraphMode::dry) return;
    if (cuda::graph_mode() == cuda::GraphMode::capture) {
      // The graph waits for the copies on the second stream instead (a capture must end with
      // every stream it forked joined back).
      if (rt.forked) {
        cuda::check_cuda(cudaEventRecord(rt.copied, rt.copy_stream), "sync (record)");
        cuda::check_cuda(cudaStreamWaitEvent(rt.stream, rt.copied, 0), "sync (join)");
        rt.forked = false;
      }
      return;
    }
    cuda::check_cuda(cudaStreamSynchronize(cuda::stream()), "sync");
    cuda::check_cuda(cudaStreamSynchronize(cuda::runtime().copy_stream), "sync (copies)");
  }
  void copy_rows_to_host_async(void* dst, size_t dpitch, const void* src, size_t spitch,
                               size_t width, size_t rows) override {
    if (width == 0 || rows == 0) return;
    if (!cuda::gate_call("copy rows to host", dst, dpitch, src, spitch, width, rows)) return;
    cuda::Runtime& rt = cuda::runtime();
    rt.forked |= cuda::graph_mode() == cuda::GraphMode::capture;  // joined by sync()
    // The copy stream waits for what is queued now (a wait takes the event's latest record at
    // the time of the call, so one event serves every copy).
    cuda::check_cuda(cudaEventRecord(rt.queued, rt.stream), "copy rows to host (record)");
    cuda::check_cuda(cudaStreamWaitEvent(rt.copy_stream, rt.queued, 0), "copy rows to host (wait)");
    cuda::check_cuda(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows,
                                       cudaMemcpyDeviceToHost, rt.copy_stream),
                     "copy rows to host");
  }
  void* alloc_host(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) cudaGetLastError();
    check(e == cudaSuccess, "cuda backend: cannot pin ", bytes, " bytes of host memory (",
          cudaGetErrorString(e), ")");
    return p;
  }
  void free_host(void* p) override {
    if (p == nullptr) return;
    cuda_drop_graphs();  // syncs: no copy into it may still be queued (and see free)
    cudaFreeHost(p);
  }
  bool supports_op(std::string_view op) const override {
    const OpInfo* info = find_op(op);
    return info != nullptr && info->has_cuda;
  }
};

}  // namespace

bool cuda_built() { return true; }

bool cuda_available() {
  static const bool ok = cuda::device_count() > 0;
  return ok;
}

Backend& cuda_backend() {
  check(cuda_available(), "device cuda: no CUDA device is available");
  cuda::runtime();
  static CudaBackend b;
  return b;
}

void cuda_make_resident(const void* host, size_t bytes) {
  if (host == nullptr || bytes == 0) return;
  Backend& b = cuda_backend();
  cuda::Runtime& rt = cuda::runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  const auto key = reinterpret_cast<uintptr_t>(host);
  if (auto it = rt.resident.find(key); it != rt.resident.end()) {
    check(it->second.bytes >= bytes, "cuda: resident range at ", host, " has ", it->second.bytes,
          " bytes, asked for ", bytes);
    ++it->second.refs;
    return;
  }
  // A range inside another resident one (a view of the same tensor) counts there.
  if (cuda::resident(host) != host) return;
  void* dev = b.alloc(bytes);
  cuda::check_cuda(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "weight upload");
  rt.resident[key] = {bytes, dev, 1};
  rt.resident_bytes += bytes;
  ++rt.resident_generation;
}

void cuda_release_resident(const void* host, size_t bytes) {
  if (host == nullptr || bytes == 0 || !cuda_available()) return;
  cuda::Runtime& rt = cuda::runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  auto it = rt.resident.find(reinterpret_cast<uintptr_t>(host));
  if (it == rt.resident.end() || --it->second.refs > 0) return;
  cuda_backend().free(it->second.dev);
  rt.resident_bytes -= it->second.bytes;
  rt.resident.erase(it);
  ++rt.resident_generation;
}

size_t cuda_resident_bytes() { return cuda::runtime().resident_bytes; }

size_t cuda_free_bytes() {
  cuda_backend();
  size_t free = 0, total = 0;
  cuda::check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

void* cuda_stream_handle() {
  cuda_backend();
  return cuda::stream();
}

void cuda_set_host_staging(bool on) { cuda::g_staging = on; }

}  // namespace k3
