// MXFP4 (compressed-tensors `mxfp4-pack-quantized`, spec §9.3).
// Logical W[rows, cols], cols % 32 == 0.
//   packed[r, j] (u8, [rows, cols/2]): low nibble = element 2j, high nibble = element 2j+1.
//   nibble n = E2M1: sign bit 3, magnitude LUT[n & 7] = {0, .5, 1, 1.5, 2, 3, 4, 6}.
//   scale[r, g]  (u8, [rows, cols/32]): E8M0, value 2^(s - 127) for columns [32g, 32g+32).
#pragma once

#include <cstdint>

namespace k3 {

inline constexpr int64_t kMxfp4Group = 32;

// Plain reference: one element at a time.
float mxfp4_value_ref(const uint8_t* packed_row, const uint8_t* scale_row, int64_t i);

// Decodes one row of `cols` values into out[cols] (table-driven; SIMD on the avx2 / avx512
// paths, bit-identical).
void mxfp4_decode_row(const uint8_t* packed_row, const uint8_t* scale_row, int64_t cols,
                      float* out);

// Encodes values that already lie on the grid of the given E8M0 scales (the stored scales are
// kept fixed: spec §11.4 item 5). Values off the grid are rounded to the nearest code.
void mxfp4_encode_row(const float* values, const uint8_t* scale_row, int64_t cols,
                      uint8_t* packed_row);

// Chooses an E8M0 scale for a group so that max|x| / scale <= 6 (the OCP rule).
uint8_t mxfp4_choose_scale(const float* group, int64_t n);

}  // namespace k3
