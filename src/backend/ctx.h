// What every op call carries: the backend it runs on, that backend's stream (null on the
// CPU), and the step's workspace arena. Threads are the worker pool (core/thread_pool.h,
// k3::set_num_threads).
#pragma once

#include "backend/backend.h"
#include "core/arena.h"

namespace k3 {

struct Ctx {
  Backend& backend;
  Arena& arena;
  void* stream = nullptr;

  // A new uninitialised tensor for this step (released by the enclosing ArenaScope).
  Tensor tensor(std::initializer_list<int64_t> shape, DType dtype = DType::f32) {
    return arena_tensor(arena, dtype, shape);
  }
};

}  // namespace k3
