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
// K3_AMX: 0 off, 1 every matrix the tiles take in fp32 and bf16 precision, unset the wide
// matrices in fp32 (core/precision.h). bf16 precision stays on vdpbf16ps by default: there the
// tiles lost at decode (bench/RESULTS.md, "bf16 on AMX tiles").
const AmxUse g_amx_from_env = [] {
  const char* env = std::getenv("K3_AMX");
  if (env == nullptr || *env == '\0') return AmxUse::wide;
  if (std::string(env) == "0") return AmxUse::off;
  if (std::string(env) == "1") return AmxUse::all;
  std::fprintf(stderr, "k3: K3_AMX must be 0 or 1, not '%s'\n", env);
  std::exit(2);
}();
std::atomic<int> g_amx_use{static_cast<int>(g_amx_from_env)};

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

AmxUse amx_use() { return static_cast<AmxUse>(g_amx_use.load(std::memory_order_relaxed)); }

AmxUse amx_use_from_env() { return g_amx_from_env; }

void set_amx_use(AmxUse use) { g_amx_use.store(static_cast<int>(use), std::memory_order_relaxed); }

bool amx_native() { return bf16_dot_native() && amx_bf16_usable(); }

bool bf16_amx_available() { return bf16_dot_available() && amx_bf16_usable(); }

bool bf16_amx_native() { return amx_native() && amx_use() == AmxUse::all; }

void set_bf16_amx_allowed(bool on) { set_amx_use(on ? AmxUse::all : AmxUse::off); }

void set_cpu_precision(const std::string& name) { set_precision(parse_precision(name)); }

std::string cpu_precision_name() {
  if (active_precision() == Precision::fp32) {
    if (!amx_native() || amx_use() == AmxUse::off) return "fp32";
    return amx_use() == AmxUse::all ? "fp32 (AMX)" : "fp32 (AMX for wide matrices)";
  }
  const std::string bf16 = bf16_amx_native()   ? "bf16 (AMX)"
                           : bf16_dot_native() ? "bf16 (vdpbf16ps)"
                                               : "bf16 (fp32 FMA of bf16 products)";
  if (active_precision() == Precision::bf16) return bf16;
  return std::string("q8 (MXFP4 x int8: ") + q8_kernel_name() + "; else " + bf16 + ")";
}

}  // namespace k3
