// The SIMD kernels behind linear and MXFP4 decoding, one table per instruction set (built in
// linear_avx2.cpp / linear_avx512.cpp with their own compiler flags; see core/cpu_isa.h for
// the rules those files follow). linear.cpp owns the threading and picks the table at run
// time. Raw pointers only: this header defines nothing inline.
//
// Canonical order (batch invariance): every output y[t, r] is one SIMD accumulator of `lanes`
// floats, FMA'd over `lanes`-column chunks in column order, then reduced in a fixed tree, on
// every path of a table (tiles, lone rows, the fused BF16 / MXFP4 decode dots; MXFP4 weights
// on a table with mxfp4_decode_pairs take their columns in the pair order given there). So a
// sequence's logits do not depend on what else is in its step. The paths need
// cols % lanes == 0; linear falls back to its scalar code otherwise.
#pragma once

#include <cstdint>

namespace k3 {

struct LinearKernels {
  const char* isa;
  int64_t lanes;
  // gemv_mxfp4 serves T <= this; larger T decode the rows once and use block_product.
  int64_t mxfp4_direct_max_t;
  // out[n] = bf16 p[n] widened (any n).
  void (*widen_bf16)(const uint16_t* p, int64_t n, float* out);
  // out[cols] = one MXFP4 row decoded (cols % 32 == 0).
  void (*mxfp4_decode)(const uint8_t* packed, const uint8_t* scales, int64_t cols, float* out);
  // MXFP4 weights' order, where not nullptr (AVX-512): the pair order, every 32-column group
  // taken as its 16 even columns, then its 16 odd ones (chunk 2g lane i: column 32g + 2i, chunk
  // 2g + 1 lane i: column 32g + 2i + 1), which the packed nibbles give without interleaving.
  // gemv_mxfp4 pairs its inputs itself; the decoded-row path decodes rows in that order with
  // mxfp4_decode_pairs and runs block_product on inputs permuted by pair_columns, so both
  // paths keep one order per output. (mxfp4_decode stays in natural order for everyone else.)
  void (*mxfp4_decode_pairs)(const uint8_t* packed, const uint8_t* scales, int64_t cols,
                             float* out);
  // out[n_rows, cols] = each row of x with every 32-column group's even columns first, then its
  // odd ones (cols % 32 == 0).
  void (*pair_columns)(const float* x, int64_t n_rows, int64_t cols, float* out);
  // y[t, r] for t < T, r in [r0, r0+nr): rows read straight from the stored BF16 weights
  // w [rows, cols] and widened in registers (token x row tiles); y has leading dimension ldy.
  // Any T.
  void (*gemv_bf16)(const float* x, int64_t T, const uint16_t* w, int64_t cols, int64_t r0,
                    int64_t nr, float* y, int64_t ldy);
  // The same from MXFP4 weights: packed [rows, cols/2], scales [rows, cols/32]. Any T (used
  // up to mxfp4_direct_max_t).
  void (*gemv_mxfp4)(const float* x, int64_t T, const uint8_t* packed, const uint8_t* scales,
                     int64_t cols, int64_t r0, int64_t nr, float* y, int64_t ldy);
  // y[t, r0+j] for t < T, j < nr, from nr already-decoded fp32 rows [nr, cols]
  // (register-tiled: each decoded row is reused by every token of the call).
  void (*block_product)(const float* x, int64_t T, const float* rows, int64_t nr, int64_t cols,
                        int64_t ldy, int64_t r0, float* y);
};

// bf16 precision (core/precision.h) on AVX512_BF16: activations as bf16 [T, cols] (rounded
// once per row by round_bf16), weights as bf16 pairs, vdpbf16ps into fp32. Canonical order as
// above, with 32-column chunks: every output y[t, r] is one 16-lane accumulator, each lane i
// taking columns (32c + 2i, 32c + 2i + 1) of chunk c in column order, reduced in the fixed
// tree of the fp32 tiles; the same on every kernel below (BF16 tiles, MXFP4 direct, MXFP4
// decoded to bf16 rows then the BF16 tiles), so bf16 results do not depend on the batch
// either. All need cols % 32 == 0 (linear falls back to the rounded fp32 path otherwise).
struct LinearBf16Kernels {
  int64_t lanes;  // columns per chunk: 32
  // gemv_mxfp4 serves T <= this; larger T decode row blocks to bf16 and run gemv_bf16 on them.
  int64_t mxfp4_direct_max_t;
  // out[n] = x[n] rounded to bf16, bit-identical to f32_to_bf16 (any n).
  void (*round_bf16)(const float* x, int64_t n, uint16_t* out);
  // x[n] as three bf16 parts, x = hi + mid + lo to within 2^-26 |x| (each part rounds, to
  // nearest even, what the parts before left): fp32 precision on bf16 multipliers.
  void (*split3_bf16)(const float* x, int64_t n, uint16_t* hi, uint16_t* mid, uint16_t* lo);
  // out[cols] = one MXFP4 row as bf16 (exact: E2M1 times a power of two fits bf16).
  void (*mxfp4_decode)(const uint8_t* packed, const uint8_t* scales, int64_t cols, uint16_t* out);
  // The same with each 32-value group at out + g * group_stride (a row of AMX A tiles).
  void (*mxfp4_decode_strided)(const uint8_t* packed, const uint8_t* scales, int64_t cols,
                               uint16_t* out, int64_t group_stride);
  // y[t, r] for t < T, r in [r0, r0+nr) from BF16 rows w [rows, cols]; any T.
  void (*gemv_bf16)(const uint16_t* x, int64_t T, const uint16_t* w, int64_t cols, int64_t r0,
                    int64_t nr, float* y, int64_t ldy);
  // The same straight from MXFP4 weights (packed [rows, cols/2], scales [rows, cols/32]).
  void (*gemv_mxfp4)(const uint16_t* x, int64_t T, const uint8_t* packed, const uint8_t* scales,
                     int64_t cols, int64_t r0, int64_t nr, float* y, int64_t ldy);
};

// q8 precision (core/precision.h): MXFP4 weights times int8 activations. Each activation row
// is quantised once (linear_q8.cpp) to blocks of 32 columns, q[i] = round(x[i] / d) in
// [-127, 127] with d = max|x| / 127, into windows of 16 blocks (512 columns; the last window
// zero-padded):
//   bytes [0, 512)    int8 q: group g < 4 (blocks 4g .. 4g+3) at 128g: the 16 even columns of
//                     each of its blocks in block order, then the 16 odd ones (the order of the
//                     packed nibbles: low = even column, high = odd);
//   bytes [512, 576)  int32 corr[16]: 12 * (sum of the block's 32 q), lane order below;
//   bytes [576, 640)  fp32 dh[16]: d / 2, lane order below.
// Lane order: lane l = 4b + g holds block 4g + b of the window (what a 4x4 transpose-add of
// the four groups' vpdpbusd sums gives). The weights enter the integer dots as 2 * E2M1 + 12,
// unsigned 0 .. 24 (vpdpbusd / vpmaddubsw take unsigned x signed bytes), and corr takes the
// offset back out: the block's integer dot isum = sum(q * 2 * E2M1) is exact. Then, the same
// on every path (so the paths agree bit for bit): per output a 16-lane fp32 accumulator,
// acc[l] = fma(float(isum of lane l's block), e8m0 * dh, acc[l]) window after window, reduced
// as (acc[0..8) + acc[8..16)), then halves again down to one value.
constexpr int64_t kQ8WinBlocks = 16;
constexpr int64_t kQ8WinCols = 512;
constexpr int64_t kQ8WinBytes = 640;

struct LinearQ8Kernels {
  // y[t, r] for t < T, r in [r0, r0+nr): xq [T, windows * kQ8WinBytes] (layout above), MXFP4
  // packed [rows, cols/2], scales [rows, cols/32]; cols % 32 == 0; y has leading dimension ldy.
  void (*gemv)(const uint8_t* xq, int64_t T, const uint8_t* packed, const uint8_t* scales,
               int64_t cols, int64_t r0, int64_t nr, float* y, int64_t ldy);
};

namespace avx2 {
extern const LinearKernels kLinearKernels;
}
namespace avx512bf16 {  // linear_avx512bf16.cpp: AVX-512 F/BW/VL/DQ + AVX512_BF16
extern const LinearBf16Kernels kLinearBf16Kernels;
}
namespace avx512 {
extern const LinearKernels kLinearKernels;
}
namespace avx2 {  // linear_q8_avx2.cpp
extern const LinearQ8Kernels kLinearQ8Kernels;
}
namespace avx512vnni {  // linear_q8_avx512vnni.cpp: AVX-512 F/BW/VL/DQ + AVX512_VNNI
extern const LinearQ8Kernels kLinearQ8Kernels;
}
// linear_amx.cpp: the bf16 precision on AMX tiles (core/precision.h's bf16_amx_native()).
// Order of the sums: that file's header. All need cols % 32 == 0.
namespace amx {
// uint16 elements of pack_x's output for T tokens of cols values.
int64_t packed_x_size(int64_t T, int64_t cols);
// x [T, cols] bf16 into the B-tile order (column pairs major, 16 tokens a tile, zero-padded).
void pack_x(const uint16_t* x, int64_t T, int64_t cols, uint16_t* xp);
// y[t, r] for t < T, r in [r0, r0+nr) from BF16 rows w [rows, cols] and the packed x (any T,
// any nr); y has leading dimension ldy.
void gemv_bf16(const uint16_t* xp, int64_t T, const uint16_t* w, int64_t cols, int64_t r0,
               int64_t nr, float* y, int64_t ldy);
// Weights as A tiles of contiguous kilobytes: a [rows/16 (rounded up)][cols/32][16][32] bf16,
// 64-byte aligned; packed_a_size elements. pack_a_row puts row j (cols bf16 values) in place;
// zero_a_rows clears rows j0 .. the end of the last tile (a tail tile's padding). Row j's
// chunk c starts at a_row_start(j, cols) + c * kAStride (an MXFP4 decode writes it in place).
constexpr int64_t kAStride = 16 * 32;
int64_t packed_a_size(int64_t rows, int64_t cols);
inline uint16_t* a_row_start(int64_t j, int64_t cols, uint16_t* a) {
  return a + (j / 16) * (cols / 32) * kAStride + (j % 16) * 32;
}
void pack_a_row(const uint16_t* row, int64_t j, int64_t cols, uint16_t* a);
void zero_a_rows(int64_t j0, int64_t rows, int64_t cols, uint16_t* a);
// y[t, j] for t < T, j < nr from the packed weights and packed x: the same sums as gemv_bf16.
void gemm_packed(const uint16_t* xp, int64_t T, const uint16_t* a, int64_t cols, int64_t nr,
                 float* y, int64_t ldy);
}  // namespace amx

}  // namespace k3
