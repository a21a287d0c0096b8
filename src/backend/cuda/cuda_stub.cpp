// The CUDA entry points when the library is built without K3_CUDA.
#include <cstring>

#include "backend/cuda/cuda.h"
#include "core/error.h"

namespace k3 {

Backend& backend_named(const char* name) {
  if (std::strcmp(name, "cpu") == 0) return cpu_backend();
  check(std::strcmp(name, "cuda") == 0, "unknown device '", name, "' (expected cpu or cuda)");
  return cuda_backend();
}

#if !defined(K3_HAVE_CUDA)
bool cuda_built() { return false; }
bool cuda_available() { return false; }
Backend& cuda_backend() {
  throw Error("device cuda: this build has no CUDA backend (configure with nvcc and K3_CUDA=ON)");
}
void cuda_make_resident(const void*, size_t) {}
void cuda_release_resident(const void*, size_t) {}
size_t cuda_resident_bytes() { return 0; }
size_t cuda_free_bytes() { return 0; }
void* cuda_stream_handle() { return nullptr; }
void cuda_set_host_staging(bool) {}
void cuda_run_graphed(uint64_t, const std::function<void()>& forward) { forward(); }
CudaGraphStats cuda_graph_stats() { return {}; }
void cuda_drop_graphs() {}
#endif

}  // namespace k3
