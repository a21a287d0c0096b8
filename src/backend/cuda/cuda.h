// The CUDA backend as the rest of the library sees it (plain C++, no CUDA headers). Built when
// K3_CUDA is on (cmake/cuda.cmake); otherwise these report "not built" and no op has a cuda
// slot. One device (0), one stream, one cuBLAS handle per process.
//
// Pointers handed to the cuda launchers are device pointers, except:
//   * weights: the model's host tensors (mapped checkpoint, widened vectors) are uploaded once
//     with cuda_make_resident(); a launcher translates such a host address to its device copy,
//   * small host arrays (row indices, block tables, candidate lists, sequence tables), which a
//     launcher copies to the device itself,
//   * in host-staging mode (the op harness: every pointer is host memory), a launcher copies
//     its inputs in and its outputs back, so the same cases test the cuda slot against ref.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "backend/backend.h"

namespace k3 {

bool cuda_built();      // compiled with K3_CUDA
bool cuda_available();  // built, and a device is usable (false, never a throw, without one)
// The CUDA backend; throws k3::Error naming why when it is unavailable.
Backend& cuda_backend();
// The backend named "cpu" or "cuda" (throws on any other name, or when cuda is unavailable).
Backend& backend_named(const char* name);

// Uploads [host, host+bytes) once; later calls for the same start only count a reference.
void cuda_make_resident(const void* host, size_t bytes);
// Drops one reference to the range starting at host; the device copy is freed with the last.
void cuda_release_resident(const void* host, size_t bytes);
size_t cuda_resident_bytes();  // total uploaded so far
size_t cuda_free_bytes();      // free device memory now
void* cuda_stream_handle();    // the backend's cudaStream_t (benchmarks time on it)

// Runs one step's host code as a CUDA graph: `forward` queues the step's work on the backend's
// stream (its logits copy to pinned host memory included); steps of one key that would queue
// the same launches with the same arguments and grids replay one graph (only the step's small
// tables are uploaded), others are captured anew. Returns with the step's work done. Falls back
// to running forward as is when a call inside cannot be captured.
void cuda_run_graphed(uint64_t key, const std::function<void()>& forward);
struct CudaGraphStats {
  int64_t captures = 0;  // steps captured (and run) as a new graph
  int64_t replays = 0;   // steps that replayed a graph
  int64_t stale = 0;     // dry runs that differed from their key's graph (then captured)
  int64_t eager = 0;     // steps run without a graph
  double dry_s = 0;      // host time in dry runs, in all (their average is a replay's host cost)
};
CudaGraphStats cuda_graph_stats();
void cuda_drop_graphs();  // frees every graph (an engine going away)

// Op harness mode: the launchers' pointer arguments are host memory (see above).
void cuda_set_host_staging(bool on);

}  // namespace k3
