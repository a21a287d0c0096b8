// What every op call carries: the backend it runs on, that backend's stream (null on the
// CPU), and the step's workspace arena. Threads are the worker pool (core/thread_pool.h,
// k3::set_num_threads).
#pragma once

#include "backend/backend.h"
#include "core/arena.h"

namespace k3 {

struct Ctx {
  Backend& backend;
  Arena& arena;  // the backend's memory: tensors
  void* stream = nullptr;
  Arena* host_arena = nullptr;  // host scratch (tables, pointer lists) when `arena` is a device's

  // A new uninitialised tensor for this step (released by the enclosing CtxScope).
  Tensor tensor(std::initializer_list<int64_t> shape, DType dtype = DType::f32) {
    Tensor t = arena_tensor(arena, dtype, shape);
    t.device = backend.device();
    return t;
  }
  // Host memory for the step's small tables (the tensor arena itself on the CPU).
  Arena& host() { return host_arena != nullptr ? *host_arena : arena; }
};

// Releases what a scope took from both of a context's arenas.
class CtxScope {
 public:
  explicit CtxScope(Ctx& ctx) : tensors_(ctx.arena), host_(ctx.host()) {}

 private:
  ArenaScope tensors_, host_;
};

}  // namespace k3
