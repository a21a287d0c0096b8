#include "core/precision.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/cpu_isa.h"
#include "core/error.h"
#include "k3/k3.h"
#include "ops/linear/linear.h"

namespace k3 {
namespace {

// K3_PRECISION decides the default once, before main (as K3_ISA: kernels run on worker
// threads, where an exception would have nowhere to go).
std::atomic<int> g_precision{[] {
  try {
    const char* env = std::getenv("K3_PRECISION");
    return static_cast<int>(env != nullptr && *env != '\0' ? parse_precision(env)
                                                           : Precision::fp32);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "k3: %s (K3_PRECISION)\n", e.what());
    std::exit(2);
  }
}()};

std::atomic<bool> g_bf16_dot_allowed{true};
// K3_AMX=1 turns the tile kernels on where the CPU has them: off by default, as measured they
// lose to vdpbf16ps at decode (bench/RESULTS.md, "bf16 on AMX tiles").
std::atomic<bool> g_bf16_amx_allowed{[] {
  const char* env = std::getenv("K3_AMX");
  return env != nullptr && std::string(env) == "1";
}()};

}  // namespace

const char* precision_name(Precision p) {
  return p == Precision::q8 ? "q8" : p == Precision::bf16 ? "bf16" : "fp32";
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  if (name == "q8") return Precision::q8;
  fail("unknown precision '", name, "' (expected fp32, bf16 or q8)");
}

Precision active_precision() {
  return static_cast<Precision>(g_precision.load(std::memory_order_relaxed));
}

void set_precision(Precision p) {
  g_precision.store(static_cast<int>(p), std::memory_order_relaxed);
}

bool bf16_dot_available() { return active_isa() == Isa::avx512 && cpu_features().avx512_bf16; }

bool bf16_dot_native() {
  return bf16_dot_available() && g_bf16_dot_allowed.load(std::memory_order_relaxed);
}

void set_bf16_dot_allowed(bool on) { g_bf16_dot_allowed.store(on, std::memory_order_relaxed); }

bool bf16_amx_available() { return bf16_dot_available() && amx_bf16_usable(); }

bool bf16_amx_native() {
  return bf16_dot_native() && g_bf16_amx_allowed.load(std::memory_order_relaxed) &&
         amx_bf16_usable();
}

void set_bf16_amx_allowed(bool on) { g_bf16_amx_allowed.store(on, std::memory_order_relaxed); }

void set_cpu_precision(const std::string& name) { set_precision(parse_precision(name)); }

std::string cpu_precision_name() {
  if (active_precision() == Precision::fp32) return "fp32";
  const std::string bf16 = bf16_amx_native()   ? "bf16 (AMX)"
                           : bf16_dot_native() ? "bf16 (vdpbf16ps)"
                                               : "bf16 (fp32 FMA of bf16 products)";
  if (active_precision() == Precision::bf16) return bf16;
  return std::string("q8 (MXFP4 x int8: ") + q8_kernel_name() + "; else " + bf16 + ")";
}

}  // namespace k3
