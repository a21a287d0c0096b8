// Graphed steps (graph.cuh): the capture / dry-run modes, the table slab, the scratch stack and
// the cache of instantiated graphs, one per step key.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda.h"
#include "backend/cuda/graph.cuh"
#include "backend/cuda/runtime.cuh"

namespace k3 {
namespace cuda {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// One event of a step, kept for K3_GRAPH_DEBUG's report.
struct Event {
  const void* fn;  // kernel, or the name of a call; nullptr: a table
  bool kernel;
  std::vector<uint64_t> parts;
};

struct Entry {
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t graph = nullptr;  // K3_GRAPH_DEBUG only (described when a launch fails)
  uint64_t hash = 0;
  bool eager_only = false;    // its capture failed (a host sync inside): run it as before
  std::vector<Event> events;  // K3_GRAPH_DEBUG only
  bool reported = false;
};

bool debugging() {
  static const bool on = [] {
    const char* v = std::getenv("K3_GRAPH_DEBUG");
    return v != nullptr && v[0] == '1';
  }();
  return on;
}

std::string event_name(const Event& ev) {
  if (ev.fn == nullptr) return "table";
  if (!ev.kernel) return static_cast<const char*>(ev.fn);
  const char* name = nullptr;
  if (cudaFuncGetName(&name, ev.fn) != cudaSuccess || name == nullptr) {
    cudaGetLastError();
    return "kernel";
  }
  return name;
}

// One step is graphed at a time (the engine's), so one slab and one scratch buffer serve all
// keys; growing either moves it, which invalidates every graph.
// The mode is the calling thread's: work another thread queues meanwhile is not the step's.
thread_local GraphMode t_mode = GraphMode::off;

struct Graphs {
  uint64_t hash = 0;
  bool overflow = false;    // the slab or the scratch was too small: run eagerly, grow, retry
  bool abort = false;       // the host code met work a graph cannot hold (see graph_abort)
  bool drop_after = false;  // memory was freed during the step: no graph may outlive it

  char* slab = nullptr;    // pinned host tables
  char* mirror = nullptr;  // their device copy
  size_t slab_cap = 0, slab_used = 0, slab_need = 0;
  cudaEvent_t slab_read = nullptr;  // the last slab upload has been read

  char* scratch = nullptr;
  size_t scratch_cap = 0, scratch_need = 0;
  struct Block {
    size_t off, n;
    bool live;
  };
  std::vector<Block> stack;

  std::unordered_map<uint64_t, Entry> entries;
  CudaGraphStats stats;
  std::vector<Event> events;  // this run's (K3_GRAPH_DEBUG)

  void begin(GraphMode m) {
    t_mode = m;
    hash = 0xcbf29ce484222325ull;
    overflow = abort = false;
    slab_used = slab_need = scratch_need = 0;
    stack.clear();
    events.clear();
  }
  void drop_all() {
    for (auto& [key, e] : entries) {
      if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
      if (e.graph != nullptr) cudaGraphDestroy(e.graph);
    }
    entries.clear();
  }
  // Grows the buffers to what the last run needed (by half again), dropping every graph.
  void grow() {
    check_cuda(cudaStreamSynchronize(stream()), "graph buffers (sync)");
    drop_all();
    if (slab_need > slab_cap) {
      if (slab != nullptr) cudaFreeHost(slab);
      if (mirror != nullptr) cudaFree(mirror);
      slab_cap = aligned(slab_need + slab_need / 2);
      check_cuda(cudaHostAlloc(reinterpret_cast<void**>(&slab), slab_cap, cudaHostAllocDefault),
                 "graph table slab");
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&mirror), slab_cap), "graph table mirror");
    }
    if (scratch_need > scratch_cap) {
      if (scratch != nullptr) cudaFree(scratch);
      scratch_cap = aligned(scratch_need + scratch_need / 2);
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&scratch), scratch_cap), "graph scratch");
    }
  }
};

Graphs& graphs() {
  static Graphs* g = new Graphs();  // never destroyed (graphs may be queued at exit)
  return *g;
}

}  // namespace

GraphMode graph_mode() { return t_mode; }

bool graph_note(const void* fn, bool kernel, const uint64_t* parts, int n) {
  Graphs& g = graphs();
  g.hash = detail::fold(detail::fold_arg(g.hash, fn), parts, sizeof(uint64_t) * n);
  if (debugging()) g.events.push_back({fn, kernel, std::vector<uint64_t>(parts, parts + n)});
  return t_mode != GraphMode::dry;
}

void graph_abort() {
  if (t_mode != GraphMode::off) graphs().abort = true;
}

const void* graph_table(const void* host, size_t n) {
  Graphs& g = graphs();
  const size_t off = g.slab_used;
  g.slab_used = off + aligned(n);
  g.slab_need = std::max(g.slab_need, g.slab_used);
  g.hash = detail::fold_arg(detail::fold_arg(g.hash, off), n);
  if (debugging()) g.events.push_back({nullptr, false, {off, n}});
  if (g.slab_used > g.slab_cap) {
    g.overflow = true;
    return g.mirror != nullptr ? g.mirror : reinterpret_cast<const void*>(kAlign);
  }
  std::memcpy(g.slab + off, host, n);
  return g.mirror + off;
}

void* graph_alloc(size_t n) {
  Graphs& g = graphs();
  const size_t off = g.stack.empty() ? 0 : aligned(g.stack.back().off + g.stack.back().n);
  g.stack.push_back({off, n == 0 ? 1 : n, true});
  g.scratch_need = std::max(g.scratch_need, off + n);
  if (off + n > g.scratch_cap) {
    g.overflow = true;
    return g.scratch != nullptr ? g.scratch : reinterpret_cast<void*>(kAlign);
  }
  return g.scratch + off;
}

void graph_free(void* p) {
  Graphs& g = graphs();
  for (auto it = g.stack.rbegin(); it != g.stack.rend(); ++it) {
    if (it->live && g.scratch + it->off == p) {
      it->live = false;
      break;
    }
  }
  while (!g.stack.empty() && !g.stack.back().live) g.stack.pop_back();
}

void memset_async(void* p, int value, size_t n, const char* what) {
  if (!gate_call(what, p, value, n)) return;
  check_cuda(cudaMemsetAsync(p, value, n, stream()), what);
}

namespace {

// The slab's tables to the device mirror, on the stream ahead of the graph.
void upload_slab(Graphs& g) {
  if (g.slab_used == 0) return;
  check_cuda(cudaMemcpyAsync(g.mirror, g.slab, g.slab_used, cudaMemcpyHostToDevice, stream()),
             "graph tables");
  if (g.slab_read == nullptr) {
    check_cuda(cudaEventCreateWithFlags(&g.slab_read, cudaEventDisableTiming), "graph event");
  }
  check_cuda(cudaEventRecord(g.slab_read, stream()), "graph tables (record)");
}

// Runs forward with the step's work captured; true when e now holds its graph.
bool capture(Graphs& g, Entry& e, const std::function<void()>& forward) {
  cudaStream_t st = stream();
  forget_forks();
  check_cuda(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed), "graph capture");
  g.begin(GraphMode::capture);
  cudaGraph_t graph = nullptr;
  try {
    forward();
  } catch (...) {
    t_mode = GraphMode::off;
    cudaStreamEndCapture(st, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // the capture's error, if a call inside broke it
    throw;
  }
  t_mode = GraphMode::off;
  const cudaError_t end = cudaStreamEndCapture(st, &graph);
  if (end != cudaSuccess || graph == nullptr || g.overflow || g.abort) {
    cudaGetLastError();
    if (graph != nullptr) cudaGraphDestroy(graph);
    return false;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  if (inst != cudaSuccess) {
    cudaGraphDestroy(graph);
    cudaGetLastError();
    return false;
  }
  if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
  if (e.graph != nullptr) cudaGraphDestroy(e.graph);
  e.graph = nullptr;
  if (debugging()) {
    e.graph = graph;
  } else {
    cudaGraphDestroy(graph);
  }
  e.exec = exec;
  e.hash = g.hash;
  e.events = std::move(g.events);
  return true;
}

// K3_GRAPH_DEBUG: where a dry run first left its capture (once per key).
void report_stale(Graphs& g, Entry& e) {
  if (!debugging() || e.reported) return;
  e.reported = true;
  const size_t n = std::min(g.events.size(), e.events.size());
  int shown = 0;
  for (size_t i = 0; i < n && shown < 12; ++i) {
    const Event &a = e.events[i], &b = g.events[i];
    if (a.fn == b.fn && a.parts == b.parts) continue;
    std::string what;
    for (size_t j = 0; j < std::max(a.parts.size(), b.parts.size()); ++j) {
      if (j >= a.parts.size() || j >= b.parts.size() || a.parts[j] != b.parts[j]) {
        what += j == 0 ? " shape" : " arg" + std::to_string(j - 1);
      }
    }
    std::fprintf(stderr, "graph debug: event %zu: captured %s, dry run %s; differs in%s\n", i,
                 event_name(a).c_str(), event_name(b).c_str(),
                 a.fn == b.fn ? what.c_str() : " function");
    ++shown;
  }
  if (g.events.size() != e.events.size()) {
    std::fprintf(stderr, "graph debug: %zu events captured, %zu in the dry run\n", e.events.size(),
                 g.events.size());
  }
}

// Launches e's graph; K3_GRAPH_DEBUG describes the graph when the launch fails.
void launch_graph(Entry& e) {
  const cudaError_t err = cudaGraphLaunch(e.exec, stream());
  if (err != cudaSuccess && e.graph != nullptr) {
    size_t n = 0;
    cudaGraphGetNodes(e.graph, nullptr, &n);
    std::vector<cudaGraphNode_t> nodes(n);
    cudaGraphGetNodes(e.graph, nodes.data(), &n);
    int types[32] = {};
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType t;
      if (cudaGraphNodeGetType(node, &t) == cudaSuccess && t < 32) ++types[t];
    }
    std::fprintf(
        stderr, "graph debug: launch failed (%s), %zu nodes; by type:", cudaGetErrorString(err), n);
    for (int t = 0; t < 32; ++t) {
      if (types[t] > 0) std::fprintf(stderr, " %d:%d", t, types[t]);
    }
    std::fprintf(stderr, "\n");
  }
  check_cuda(err, "graph launch");
  check_cuda(cudaStreamSynchronize(stream()), "graph step");
}

}  // namespace

}  // namespace cuda

namespace {

void run_graphed(uint64_t key, const std::function<void()>& forward) {
  cuda::Graphs& g = cuda::graphs();
  cuda::Entry& e = g.entries[key];
  if (e.eager_only) {
    ++g.stats.eager;
    forward();
    return;
  }
  // The previous step's tables have been read before the slab is rewritten.
  if (g.slab_read != nullptr) cuda::check_cuda(cudaEventSynchronize(g.slab_read), "graph tables");
  if (e.exec != nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    g.begin(cuda::GraphMode::dry);
    try {
      forward();
    } catch (...) {
      cuda::t_mode = cuda::GraphMode::off;
      throw;
    }
    cuda::t_mode = cuda::GraphMode::off;
    g.stats.dry_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!g.overflow && !g.abort && g.hash == e.hash) {
      cuda::upload_slab(g);
      cuda::launch_graph(e);
      ++g.stats.replays;
      return;
    }
    ++g.stats.stale;
    cuda::report_stale(g, e);
  }
  bool captured = false, failed = false;
  try {
    captured = cuda::capture(g, e, forward);
  } catch (const Cancelled&) {
    throw;
  } catch (const Error&) {
    failed = true;  // a call inside cannot be captured (a host sync), or the step is bad
  }
  if (captured) {
    cuda::upload_slab(g);
    cuda::launch_graph(e);
    ++g.stats.captures;
    return;
  }
  ++g.stats.eager;
  if (g.overflow) g.grow();  // drops e's graph with every other (e is not used below)
  forward();                 // a genuine error of the step throws here
  // The eager run passed where the capture threw: this key runs as before from now on.
  if (failed) g.entries[key].eager_only = true;
}

}  // namespace

void cuda_run_graphed(uint64_t key, const std::function<void()>& forward) {
  cuda::Graphs& g = cuda::graphs();
  g.drop_after = false;
  try {
    run_graphed(key, forward);
  } catch (...) {
    if (g.drop_after) cuda_drop_graphs();
    throw;
  }
  if (g.drop_after) cuda_drop_graphs();
}

CudaGraphStats cuda_graph_stats() { return cuda::graphs().stats; }

void cuda_drop_graphs() {
  cuda::Graphs& g = cuda::graphs();
  if (cuda::t_mode != cuda::GraphMode::off) {  // memory freed inside a graphed step's host code
    g.abort = g.drop_after = true;
    return;
  }
  cudaStreamSynchronize(cuda::stream());  // no throw: engines call this from their destructor
  g.drop_all();
}

}  // namespace k3
