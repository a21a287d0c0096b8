// Runtime instruction-set dispatch. One binary carries a scalar path and, in translation units
// built with their own flags (files named *_avx2.cpp and *_avx512.cpp), AVX2+FMA+F16C and
// AVX-512 (F, BW, VL, DQ) kernels. At start-up the best path the CPU and the OS support is
// chosen (cpuid for the instructions, xgetbv for the OS saving the ymm / zmm state); K3_ISA=
// scalar|avx2|avx512 forces one, and asking for a path the CPU lacks is refused with a message.
//
// Rule for the *_avx2.cpp / *_avx512.cpp files: they define only functions of their own (in a
// namespace named after the ISA) and include no header that defines inline functions or
// templates used elsewhere (no <vector>, <algorithm>, core/bf16.h...): the linker keeps one
// copy of such a function, and an AVX-512 copy would then run on a CPU without AVX-512.
#pragma once

#include <string>
#include <vector>

namespace k3 {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);

// What this CPU and OS can run, best last (always starts with scalar).
const std::vector<Isa>& supported_isas();
bool isa_supported(Isa isa);

// Extra AVX-512 extensions, for the start-up report (kernels do not rely on them yet).
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, amx_tile = false, amx_bf16 = false;
  bool os_ymm = false, os_zmm = false, os_amx = false;
};
const CpuFeatures& cpu_features();

// AMX (tile registers, TDPBF16PS): the CPU has AMX-TILE and AMX-BF16, the OS saves the tile
// state, and Linux granted this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked
// once, on the first call; every thread of the process may use the tiles after it).
bool amx_bf16_usable();

// The path kernels take now: K3_ISA if set (the process stops with a message when it names
// a path this CPU lacks), else the best supported one.
Isa active_isa();

// Switches the path (tests run every supported one). Throws k3::Error for an unsupported path.
void set_isa(Isa isa);

// Parses "scalar" / "avx2" / "avx512"; throws k3::Error naming the bad value.
Isa parse_isa(const std::string& name);

// Picks the kernel for the active path, falling back to the next lower one a kernel lacks.
template <typename Fn>
Fn* isa_pick(Fn* scalar, Fn* avx2, Fn* avx512) {
  const Isa isa = active_isa();
  if (isa == Isa::avx512 && avx512 != nullptr) return avx512;
  if (isa >= Isa::avx2 && avx2 != nullptr) return avx2;
  return scalar;
}

}  // namespace k3
