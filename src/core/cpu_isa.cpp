#include "core/cpu_isa.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "k3/k3.h"

namespace k3 {
namespace {

struct CpuidRegs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned sub) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return {};
  return r;
}

// XCR0: which register states the OS saves on a context switch.
unsigned long long xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool bit(unsigned v, int i) { return ((v >> i) & 1u) != 0; }

CpuFeatures detect() {
  CpuFeatures f;
  const CpuidRegs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27);
  if (osxsave) {
    const unsigned long long x = xcr0();
    f.os_ymm = (x & 0x6) == 0x6;                // SSE + AVX state
    f.os_zmm = f.os_ymm && (x & 0xe0) == 0xe0;  // opmask, ZMM0-15 high halves, ZMM16-31
    f.os_amx = (x & 0x60000) == 0x60000;        // XTILECFG + XTILEDATA
  }
  f.fma = bit(l1.c, 12);
  f.f16c = bit(l1.c, 29);
  const CpuidRegs l7 = cpuid(7, 0);
  f.avx2 = bit(l7.b, 5);
  f.avx512f = bit(l7.b, 16);
  f.avx512dq = bit(l7.b, 17);
  f.avx512bw = bit(l7.b, 30);
  f.avx512vl = bit(l7.b, 31);
  f.avx512_vnni = bit(l7.c, 11);
  f.amx_tile = bit(l7.d, 24);
  f.amx_bf16 = bit(l7.d, 22);
  f.avx512_bf16 = bit(cpuid(7, 1).a, 5);
  return f;
}

bool can_run(const CpuFeatures& f, Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
      return f.os_ymm && f.avx2 && f.fma && f.f16c;
    case Isa::avx512:
      return can_run(f, Isa::avx2) && f.os_zmm && f.avx512f && f.avx512bw && f.avx512vl &&
             f.avx512dq;
  }
  return false;
}

Isa best_isa() { return supported_isas().back(); }

// K3_ISA decides the path once, before main: a bad value stops the process with a message
// (kernels run on worker threads, where an exception would have nowhere to go).
std::atomic<int> g_isa{[] {
  try {
    const char* env = std::getenv("K3_ISA");
    const Isa isa = env != nullptr && *env != '\0' ? parse_isa(env) : best_isa();
    check(isa_supported(isa), "K3_ISA=", env, ": this CPU (or its OS) cannot run the ",
          isa_name(isa), " path; it supports ", isa_name(best_isa()), " at best");
    return static_cast<int>(isa);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "k3: %s\n", e.what());
    std::exit(2);
  }
}()};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const std::vector<Isa>& supported_isas() {
  static const std::vector<Isa> v = [] {
    std::vector<Isa> r;
    for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
      if (can_run(cpu_features(), i)) r.push_back(i);
    return r;
  }();
  return v;
}

bool amx_bf16_usable() {
  static const bool usable = [] {
    const CpuFeatures& f = cpu_features();
    if (!(f.amx_tile && f.amx_bf16 && f.os_amx && can_run(f, Isa::avx512))) return false;
    constexpr long kReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM (asm/prctl.h)
    constexpr long kXtileData = 18;         // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return usable;
}

bool isa_supported(Isa isa) { return can_run(cpu_features(), isa); }

Isa parse_isa(const std::string& name) {
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (name == isa_name(i)) return i;
  fail("unknown instruction-set path '", name, "' (K3_ISA): expected scalar, avx2 or avx512");
}

Isa active_isa() { return static_cast<Isa>(g_isa.load(std::memory_order_relaxed)); }

void set_isa(Isa isa) {
  check(isa_supported(isa), "the ", isa_name(isa),
        " path cannot run on this CPU (best: ", isa_name(best_isa()), ")");
  g_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

std::string cpu_isa_name() { return isa_name(active_isa()); }

}  // namespace k3
