// Linear layers: y[T, rows] = x[T, cols] · W[rows, cols]^T, fp32 accumulation. W stays in its
// stored format (BF16, F32 or MXFP4, memory-mapped) and is widened row by row on the fly.
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

enum class MatFormat { bf16, f32, mxfp4 };

struct Mat {
  int64_t rows = 0, cols = 0;
  MatFormat format = MatFormat::f32;
  const void* data = nullptr;       // [rows, cols] values, or [rows, cols/2] packed nibbles
  const uint8_t* scales = nullptr;  // MXFP4 only: E8M0 [rows, cols/32]
  // fp32 arithmetic whatever the CPU precision (core/precision.h): set for the MoE router,
  // whose near-equal scores would otherwise pick other experts under bf16 rounding.
  bool keep_fp32 = false;
  bool empty() const { return data == nullptr; }
};

// out[cols] = W[r, :] as fp32.
void mat_row(const Mat& w, int64_t r, float* out);

// x [T, w.cols] -> y [T, w.rows].
using LinearFn = void(const float* x, int64_t T, const Mat& w, float* y);
// Backward (fp32 weights only: training keeps fp32 master weights), adding
//   dx [T, cols] += dy · W,   dW [rows, cols] += dyᵀ · x     (dy [T, rows]; null skips one).
using LinearBwdFn = void(const float* x, int64_t T, const Mat& w, const float* dy, float* dx,
                         float* dW);
extern const OpTable<LinearFn, LinearBwdFn> kLinearOp;  // "linear": ref, cpu, bwd linear_bwd
void linear_bwd(const float* x, int64_t T, const Mat& w, const float* dy, float* dx, float* dW);

// Plain reference, one dot product at a time in double; never optimised.
void linear_ref(const float* x, int64_t T, const Mat& w, float* y);

// q8 precision (core/precision.h): whether linear(x, T, w, y) runs w as MXFP4 x int8 now.
bool linear_takes_q8(const Mat& w);
// Bytes of one quantised activation row of `cols` columns (layout: linear_kernels.h).
int64_t q8_row_bytes(int64_t cols);
// xq [T, q8_row_bytes(cols)] from x [T, cols] (cols % 32 == 0; threaded for large T), for
// callers that multiply the same rows by several matrices (the decode step's experts).
void q8_quantize(const float* x, int64_t T, int64_t cols, uint8_t* xq);
// y[t * ldy + r] for t < T, r in [r0, r0 + nr) of MXFP4 w from rows quantised by q8_quantize,
// on the calling thread.
void linear_q8_rows(const uint8_t* xq, int64_t T, const Mat& w, int64_t r0, int64_t nr, float* y,
                    int64_t ldy);
// The q8 GEMV the active path takes: "avx512vnni", "avx2" or "scalar".
const char* q8_kernel_name();

// Threaded, row-blocked version (each decoded weight row is reused across all T inputs).
void linear(const float* x, int64_t T, const Mat& w, float* y);

// Projections that share their input: ys[i] [T, ws[i].rows] = x [T, cols] · ws[i]ᵀ for i < n
// (every ws[i].cols the same), each as linear() would compute it. The device runs the BF16
// matrices of a decode step in one GEMV launch over all their rows: one ramp up and one tail
// instead of one per matrix.
using LinearMultiFn = void(const float* x, int64_t T, const Mat* ws, float* const* ys, int64_t n);
extern const OpTable<LinearMultiFn> kLinearMultiOp;  // "linear_multi"

}  // namespace k3
