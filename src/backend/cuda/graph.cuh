// Internal to the .cu files: how a step becomes a CUDA graph (the engine's side is in cuda.h,
// cuda_run_graphed).
//
// A graphed step runs the model's host code in one of two modes instead of launching:
//   capture  the launches, cuBLAS calls and memsets go into a graph (stream capture);
//   dry      nothing reaches the device: the host code only fills the step's tables.
// Both modes route what varies from step to step through two places whose addresses do not
// change: small host tables (upload()) are written to a pinned slab and read by the kernels
// from its device mirror, and scratch comes from a stack over one fixed device buffer. Every
// launch, cuBLAS call and memset folds its function, grid and argument bytes into a running
// hash; a dry run whose hash equals the capture's would have launched exactly the captured
// work, so one slab upload and a graph launch replace it. Any difference (a grid that grew,
// a moved pointer) shows in the hash, and the step is captured again.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace k3::cuda {

enum class GraphMode : uint8_t { off, capture, dry };
GraphMode graph_mode();

// Folds an event of the step (a kernel's or call's identity and the hashes of its shape and of
// each argument) into the running hash. Returns whether the work should reach the stream
// (false in a dry run). K3_GRAPH_DEBUG=1 prints where a stale dry run first differs.
bool graph_note(const void* fn, bool kernel, const uint64_t* parts, int n);

// Device table space for n bytes of a host array in a graphed step (the host bytes are copied
// to the slab now; the device mirror is filled before the graph runs).
const void* graph_table(const void* host, size_t n);
// Scratch of a graphed step (a stack over the fixed buffer); graph_free releases it.
void* graph_alloc(size_t n);
void graph_free(void* p);
// The host code met work a graph cannot hold (a persistent cache to rebuild): the step runs
// without a graph this time.
void graph_abort();

namespace detail {
constexpr uint64_t kSeed = 0xcbf29ce484222325ull;
inline uint64_t fold(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;  // FNV-1a
  return h;
}
template <typename T>
uint64_t fold_arg(uint64_t h, const T& v) {
  return fold(h, &v, sizeof(T));
}
// The hash of one kernel argument: its bytes, with a struct's (or closure's) padding cleared
// first, since those bytes are not its value and differ from call to call.
template <typename T>
uint64_t arg_hash(T v) {
  if constexpr (std::is_class_v<T>) __builtin_clear_padding(&v);
  return fold(kSeed, &v, sizeof v);
}
}  // namespace detail

cudaStream_t stream();
void forget_forks();  // a new capture: no copy stream forked from it yet (cuda_backend.cu)

// kernel<<<grid, block, smem, stream()>>>(args...) through the graph gate: the arguments are
// converted to the kernel's parameter types first, and those bytes are what the hash sees.
template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: argument count differs from the kernel's");
  if (graph_mode() == GraphMode::off) {
    kernel<<<grid, block, smem, stream()>>>(std::forward<A>(args)...);
    return;
  }
  struct Shape {
    unsigned g[3], b[3];
    uint64_t smem;
  } shape{{grid.x, grid.y, grid.z}, {block.x, block.y, block.z}, smem};
  uint64_t parts[sizeof...(P) + 1] = {detail::fold(detail::kSeed, &shape, sizeof shape)};
  int i = 1;
  ((parts[i++] = detail::arg_hash<P>(args)), ...);
  if (!graph_note(reinterpret_cast<const void*>(kernel), true, parts, i)) return;
  kernel<<<grid, block, smem, stream()>>>(std::forward<A>(args)...);
}

// A call that is not a kernel launch (cuBLAS, memset): its identity and argument bytes go to
// the hash; returns whether to make the call.
template <typename... A>
bool gate_call(const char* what, const A&... args) {
  if (graph_mode() == GraphMode::off) return true;
  uint64_t parts[sizeof...(A) + 1] = {0};
  int i = 1;
  ((parts[i++] = detail::arg_hash<A>(args)), ...);
  return graph_note(what, false, parts, i);
}

// cudaMemsetAsync on the stream, through the gate.
void memset_async(void* p, int value, size_t n, const char* what);

}  // namespace k3::cuda
