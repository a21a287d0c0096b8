// What linear.cpp (the fp32 arithmetic) and linear_bf16.cpp (the bf16 precision) share.
#pragma once

#include <cstdint>

#include "ops/linear/linear.h"

namespace k3 {

constexpr int64_t kRowsPerBlock = 8;  // rows decoded together by the bf16 precision (prefill)
constexpr int64_t kGemvRows = 16;     // weight rows per task on the straight-from-storage paths

// Whether a straight-from-storage GEMV of T tokens over w is worth the threads (decode-size
// calls stay on one thread unless large; linear.cpp says why).
bool gemv_worth_splitting(int64_t T, const Mat& w);

// linear in fp32 arithmetic, whatever the precision (the bf16 fallback calls it on rounded x).
void linear_fp32(const float* x, int64_t T, const Mat& w, float* y);

// linear in bf16 precision (BF16 / MXFP4 weights): x rounded to bf16 once per row, fp32
// accumulation; vdpbf16ps where core/precision.h's bf16_dot_native().
void linear_bf16(const float* x, int64_t T, const Mat& w, float* y);

// linear in q8 precision (MXFP4 weights only): x quantised to int8 once per row, integer
// dots (linear_q8.cpp).
void linear_q8(const float* x, int64_t T, const Mat& w, float* y);

// linear in fp32 precision on AMX tiles (x as three bf16 parts): false, having done nothing,
// where the tiles do not take w (no AMX, or not enabled, F32 weights, a small matrix).
bool linear_fp32_amx(const float* x, int64_t T, const Mat& w, float* y);

// out[n] = x[n] rounded to bf16 and widened back (f32_to_bf16 then bf16_to_f32).
void round_to_bf16_values(const float* x, int64_t n, float* out);

}  // namespace k3
