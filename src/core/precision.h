// The arithmetic of the CPU matmuls (linear with BF16 or MXFP4 weights), chosen per process.
//
//   fp32 (default): activations stay fp32, weights are widened exactly, fp32 FMAs. The golden
//        tests hold this path to the float64 references. On CPUs with AMX the matrices the
//        tiles take (AmxUse below) run there instead, each activation as three bf16 parts
//        (x = hi + mid + lo to 2^-26) against the exact bf16 weights: as accurate as the FMAs,
//        another fixed order of the fp32 sums.
//   bf16: every activation row is rounded once to bf16 (round to nearest even, as f32_to_bf16)
//        and multiplied with the exact weights, fp32 accumulation. On AVX-512 CPUs with
//        AVX512_BF16 the products run as vdpbf16ps (two bf16 products per fp32 lane); elsewhere
//        (avx2, scalar, AVX-512 without BF16) the bf16-rounded activations go through the fp32
//        kernels, whose products are then exact too. On CPUs with AMX (AMX-BF16, granted by
//        the OS) the vdpbf16ps kernels can give way to tile kernels (TDPBF16PS, K3_AMX=1) at every
//        batch size: the same products, the fp32 sums in another fixed order. Its own tolerance:
//        docs/CPU.md.
//   q8:  MXFP4 matmuls (the routed experts) take int8 activations: each row quantised once to
//        blocks of 32 with one fp32 scale (d = max|x| / 127), integer dots with the doubled
//        E2M1 values (vpdpbusd on AVX512_VNNI, vpmaddubsw on AVX2), scaled by E8M0 * d / 2 in
//        fp32 (ops/linear/linear_q8.cpp); every other BF16 / MXFP4-free matmul as bf16. Its own
//        tolerance: docs/CPU.md.
//
// K3_PRECISION=fp32|bf16|q8 sets it at start-up (a bad value stops the process with a message,
// exit code 2, like K3_ISA); the CLI's --precision and set_precision() change it later.
#pragma once

#include <string>

namespace k3 {

enum class Precision : int { fp32 = 0, bf16 = 1, q8 = 2 };

const char* precision_name(Precision p);
// Parses "fp32" / "bf16" / "q8"; throws k3::Error naming the bad value.
Precision parse_precision(const std::string& name);

Precision active_precision();
void set_precision(Precision p);

// Whether bf16 precision runs on vdpbf16ps now: the avx512 path on a CPU with AVX512_BF16,
// unless a test turned it off (to run the fallback on such a CPU).
bool bf16_dot_native();
bool bf16_dot_available();           // the CPU and the active path could
void set_bf16_dot_allowed(bool on);  // tests: false forces the fallback

// Which matmuls run on AMX tiles (TDPBF16PS), where amx_native():
//   off:  none (K3_AMX=0);
//   wide: in fp32 precision, matrices of at least 2048 columns (the default, K3_AMX unset):
//         measured faster at prefill and decode on K3's widths, slower at decode on small
//         ones (docs/CPU.md);
//   all:  matrices of at least 1024 columns, in fp32 and in bf16 precision (K3_AMX=1).
// Always at least 256 rows. Which matrices take the tiles is a property of the matrix, never
// of the batch, so results stay batch invariant.
enum class AmxUse : int { off = 0, wide = 1, all = 2 };
AmxUse amx_use();
AmxUse amx_use_from_env();  // K3_AMX's choice (read once, before main; a bad value exits 2)
void set_amx_use(AmxUse use);
// The CPU, the OS and the active path could: bf16_dot_native() and amx_bf16_usable().
bool amx_native();
bool bf16_amx_available();  // the same, whether or not a test turned vdpbf16ps off
// Whether bf16 precision's products run on the tiles: amx_native() and AmxUse::all.
bool bf16_amx_native();
void set_bf16_amx_allowed(bool on);  // tests: set_amx_use(on ? all : off)

}  // namespace k3
