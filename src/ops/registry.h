// The op registry. Every op has one id (its name) and up to three implementations of one
// launcher signature (raw pointers + a shape struct):
//   ref   the plain reference: slow, obvious, often in double; kept forever as the oracle,
//   cpu   the fast CPU version (SIMD, threads),
//   cuda  the device version (empty until the CUDA backend fills it),
// and a `bwd` slot with the fp32 backward launcher (training), of the op's own signature BwdFn:
// it ADDS the gradients of its inputs given the output gradient (null pointers skip one). The
// op harness runs every registered implementation against `ref` on fresh random inputs, and
// checks every `bwd` against finite differences of `ref` (its grad mode).
//
// Declaring an op (in its folder's <op>.h / <op>.cpp):
//   using LinearFn = void(const float* x, int64_t T, const Mat& w, float* y);
//   extern const OpTable<LinearFn> kLinearOp;                     // header
//   const OpTable<LinearFn> kLinearOp = register_op<LinearFn>(    // .cpp
//       {.name = "linear", .ref = linear_ref, .cpu = linear_cpu});
// Calling it: kLinearOp.on(ctx)(x, T, w, y) picks the implementation for ctx's backend
// (falling back to cpu when the device has none: model code never asks which device).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backend/ctx.h"

namespace k3 {

enum class Impl : uint8_t { ref, cpu, cuda };
const char* impl_name(Impl i);

// What is registered for an op (for supports_op, `k3 ops` style listings and the harness).
struct OpInfo {
  std::string name;
  bool has_ref = false, has_cpu = false, has_cuda = false, has_bwd = false;
};

const std::vector<OpInfo>& registered_ops();
const OpInfo* find_op(std::string_view name);
void add_op_info(OpInfo info);  // used by register_op

template <typename Fn, typename BwdFn = void>
struct OpTable {
  const char* name = "";
  Fn* ref = nullptr;
  Fn* cpu = nullptr;
  Fn* cuda = nullptr;
  BwdFn* bwd = nullptr;  // backward launcher (void: the op has none)

  Fn* get(Impl i) const { return i == Impl::ref ? ref : i == Impl::cpu ? cpu : cuda; }
  // The implementation for the context's device: its own, else the CPU one.
  Fn* on(const Ctx& ctx) const {
    if (ctx.backend.device() == Device::cuda && cuda != nullptr) return cuda;
    return cpu;
  }
};

// Records the op in the registry and returns it; the CPU slot defaults to the reference.
template <typename Fn, typename BwdFn = void>
OpTable<Fn, BwdFn> register_op(OpTable<Fn, BwdFn> t) {
  if (t.cpu == nullptr) t.cpu = t.ref;
  add_op_info({t.name, t.ref != nullptr, t.cpu != nullptr, t.cuda != nullptr, t.bwd != nullptr});
  return t;
}

}  // namespace k3
