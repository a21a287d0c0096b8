#include "ops/linear/linear.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/bf16.h"
#include "core/cpu_isa.h"
#include "core/dot8.h"
#include "core/parallel.h"
#include "core/precision.h"
#include "core/scratch.h"
#include "ops/linear/linear_internal.h"
#include "ops/linear/linear_kernels.h"
#include "ops/mxfp4/mxfp4.h"

namespace k3 {
namespace {

// The SIMD kernel table for the active instruction set; nullptr on the scalar path.
const LinearKernels* simd_kernels() {
  return isa_pick<const LinearKernels>(nullptr, &avx2::kLinearKernels, &avx512::kLinearKernels);
}

}  // namespace

void mat_row(const Mat& w, int64_t r, float* out) {
  switch (w.format) {
    case MatFormat::f32: {
      const float* p = static_cast<const float*>(w.data) + r * w.cols;
      for (int64_t i = 0; i < w.cols; ++i) out[i] = p[i];
      break;
    }
    case MatFormat::bf16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + r * w.cols;
      if (const LinearKernels* k = simd_kernels()) {
        k->widen_bf16(p, w.cols, out);
        break;
      }
      for (int64_t i = 0; i < w.cols; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
    case MatFormat::mxfp4: {
      const uint8_t* p = static_cast<const uint8_t*>(w.data) + r * (w.cols / 2);
      mxfp4_decode_row(p, w.scales + r * (w.cols / kMxfp4Group), w.cols, out);
      break;
    }
  }
}

void linear_ref(const float* x, int64_t T, const Mat& w, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    mat_row(w, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      double acc = 0;
      for (int64_t i = 0; i < w.cols; ++i) acc += static_cast<double>(x[t * w.cols + i]) * row[i];
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

namespace {

// A decode GEMV of fewer multiply-adds runs on one thread: handing half of it to a worker
// that has gone to sleep (tiny models leave gaps of more than the pool's 50 µs spin between
// parallel ops) costs a futex wake-up, tens of µs on a virtual machine, as long as a 512 KB
// BF16 matrix takes to stream. K3-small's experts (512 x 1024) and larger stay parallel.
constexpr int64_t kDecodeParallelMacs = int64_t{1} << 18;
// ... and one smaller than this only while the workers spin (no wake-up to pay): the default
// model's lm_head (8192 x 256) alone per step was slower on two threads than on one.
constexpr int64_t kDecodeWakeMacs = int64_t{1} << 22;

}  // namespace

bool gemv_worth_splitting(int64_t T, const Mat& w) {
  const int64_t macs = w.rows * w.cols * T;
  return T <= 2 ? worth_splitting(macs, kDecodeParallelMacs, kDecodeWakeMacs) : macs > 32768;
}

namespace {

// Weight rows per task of the direct path. With many tokens a task streams all T input rows
// past its weight rows (in L1/L2) once, so fewer, taller tasks read the inputs fewer times:
// 64 BF16 rows (128 KB at 1024 columns) when there are 64 or more tokens and enough rows for
// four tasks a thread.
int64_t task_rows(int64_t T, const Mat& w) {
  constexpr int64_t kTallRows = 64;
  const bool tall =
      w.format == MatFormat::bf16 && T >= 64 && w.rows >= kTallRows * 4 * thread_pool().size();
  return tall ? kTallRows : kGemvRows;
}

// Straight from storage (no decoded copy): BF16 at any T (register tiles widen the weights
// in registers, exactly), MXFP4 for small T (each group decoded in registers, once per token
// or, with AVX-512, once per four tokens).
bool linear_direct(const LinearKernels& k, const float* x, int64_t T, const Mat& w, float* y) {
  if (w.format == MatFormat::f32 || (w.format == MatFormat::mxfp4 && T > k.mxfp4_direct_max_t))
    return false;
  const int64_t rows = task_rows(T, w);
  const int64_t n_tasks = (w.rows + rows - 1) / rows;
  parallel_for(n_tasks, gemv_worth_splitting(T, w), [&](int64_t task) {
    const int64_t r0 = task * rows, nr = std::min(rows, w.rows - r0);
    if (w.format == MatFormat::bf16) {
      k.gemv_bf16(x, T, static_cast<const uint16_t*>(w.data), w.cols, r0, nr, y, w.rows);
    } else {
      k.gemv_mxfp4(x, T, static_cast<const uint8_t*>(w.data), w.scales, w.cols, r0, nr, y, w.rows);
    }
  });
  return true;
}

// MXFP4 rows decoded together for the fp32 GEMM (a prefill's experts): a multiple of the
// AVX2 tile's 3 rows and the AVX-512 tile's 4, so no block ends in a narrower tile (8 rows
// were 3 + 3 + 2 on AVX2: 12 rows take 512 x 1024 at T = 64 from ~61 to ~80 GFLOP/s).
constexpr int64_t kDecodedRows = 12;

// y[t, r0..r0+nr) for all t, from nr decoded rows, with the portable dot.
void block_product_scalar(const float* x, int64_t T, const float* rows, int64_t nr, int64_t cols,
                          int64_t ld_y, int64_t r0, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < nr; ++j)
      y[t * ld_y + r0 + j] = dot8(x + t * cols, rows + j * cols, cols);
  }
}

}  // namespace

// The SIMD paths keep one canonical summation order per output (linear_kernels.h); widths off
// the SIMD lanes, and the scalar path, use the portable `dot` everywhere (also batch invariant).
void linear_fp32(const float* x, int64_t T, const Mat& w, float* y) {
  if (linear_fp32_amx(x, T, w, y)) return;
  const LinearKernels* k = simd_kernels();
  if (k != nullptr && w.cols % k->lanes != 0) k = nullptr;
  if (k != nullptr && linear_direct(*k, x, T, w, y)) return;
  // MXFP4 on a kernel table with the pair order: rows decoded in that order, and the inputs
  // permuted to match once per call (linear_kernels.h).
  const bool pairs = k != nullptr && w.format == MatFormat::mxfp4 && k->mxfp4_decode_pairs;
  const float* xb = x;
  if (pairs) {
    float* xp = thread_scratch<float, struct LinearPairedXTag>(T * w.cols);
    k->pair_columns(x, T, w.cols, xp);
    xb = xp;
  }
  const int64_t n_blocks = (w.rows + kDecodedRows - 1) / kDecodedRows;
  parallel_for(n_blocks, w.rows * w.cols * T > 32768, [&](int64_t b) {
    float* rows = thread_scratch<float, struct LinearRowsTag>(kDecodedRows * w.cols);
    const int64_t r0 = b * kDecodedRows;
    const int64_t nr = std::min(kDecodedRows, w.rows - r0);
    for (int64_t j = 0; j < nr; ++j) {
      if (pairs) {
        const int64_t r = r0 + j;
        k->mxfp4_decode_pairs(static_cast<const uint8_t*>(w.data) + r * (w.cols / 2),
                              w.scales + r * (w.cols / kMxfp4Group), w.cols, rows + j * w.cols);
      } else {
        mat_row(w, r0 + j, rows + j * w.cols);
      }
    }
    if (k != nullptr) {
      k->block_product(xb, T, rows, nr, w.cols, w.rows, r0, y);
    } else {
      block_product_scalar(x, T, rows, nr, w.cols, w.rows, r0, y);
    }
  });
}

// bf16 and q8 precision (core/precision.h) apply to the stored low-precision weights; F32
// weights (training's master weights, tests) and the MoE router (Mat::keep_fp32) keep fp32.
// q8 takes the MXFP4 weights and treats BF16 ones as bf16 does.
void linear(const float* x, int64_t T, const Mat& w, float* y) {
  const Precision p = active_precision();
  if (p != Precision::fp32 && w.format != MatFormat::f32 && !w.keep_fp32) {
    if (p == Precision::q8 && w.format == MatFormat::mxfp4) {
      linear_q8(x, T, w, y);
    } else {
      linear_bf16(x, T, w, y);
    }
    return;
  }
  linear_fp32(x, T, w, y);
}

template <LinearFn* kOne>
void linear_each(const float* x, int64_t T, const Mat* ws, float* const* ys, int64_t n) {
  for (int64_t i = 0; i < n; ++i) kOne(x, T, ws[i], ys[i]);
}

const OpTable<LinearMultiFn> kLinearMultiOp =
    register_op<LinearMultiFn>({.name = "linear_multi",
                                .ref = linear_each<linear_ref>,
                                .cpu = linear_each<linear>,
                                .cuda = K3_CUDA_IMPL(linear_multi_cuda)});

const OpTable<LinearFn, LinearBwdFn> kLinearOp =
    register_op<LinearFn, LinearBwdFn>({.name = "linear",
                                        .ref = linear_ref,
                                        .cpu = linear,
                                        .cuda = K3_CUDA_IMPL(linear_cuda),
                                        .bwd = linear_bwd});

}  // namespace k3
