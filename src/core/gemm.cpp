#include "core/gemm.h"

#include <algorithm>

#include "core/cpu_isa.h"
#include "core/gemm_kernels.h"
#include "core/parallel.h"
#include "core/scratch.h"

namespace k3 {
namespace {

constexpr int64_t kScalarRows = 4, kScalarCols = 64;

// The portable tile: kScalarRows x kScalarCols accumulators in an array the compiler keeps in
// L1 and vectorises over columns (baseline x86-64: SSE2, separate multiply and add).
void tile_scalar(int64_t rows, int64_t cols, int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
                 const float* b, int64_t ldb, float* c, int64_t ldc) {
  float acc[kScalarRows][kScalarCols];
  for (int64_t r = 0; r < rows; ++r) std::copy_n(c + r * ldc, cols, acc[r]);
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * ldb;
    for (int64_t r = 0; r < rows; ++r) {
      const float ar = a[r * a_rs + p * a_cs];
      for (int64_t j = 0; j < cols; ++j) acc[r][j] += ar * bp[j];
    }
  }
  for (int64_t r = 0; r < rows; ++r) std::copy_n(acc[r], cols, c + r * ldc);
}

const GemmKernels kScalarKernels{"scalar", kScalarRows, kScalarCols, tile_scalar};

const GemmKernels& kernels() {
  return *isa_pick<const GemmKernels>(&kScalarKernels, &avx2::kGemmKernels, &avx512::kGemmKernels);
}

// Cache blocking: a task owns a block of C (all its rows when the product runs on one thread,
// else a few row tiles, x kBlockCols columns) and walks k in slabs of kDepth, so the slab of B
// it reuses across its row tiles stays in L2 and B is read from memory once per task. A
// row-major A is read in place; in another layout (the transposed dy of a weight gradient)
// each row tile is packed (kDepth x mr, contiguous) once per slab for the block's column tiles.
constexpr int64_t kDepth = 256;
constexpr int64_t kBlockCols = 256;
constexpr int64_t kTilesPerTask = 4;

struct Product {
  int64_t m, n, k;
  GemmA a;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
};

// out[p * rows + r] = A(i + r, p0 + p) for r < rows, p < kc.
void pack_a(const GemmA& a, int64_t i, int64_t rows, int64_t p0, int64_t kc, float* out) {
  for (int64_t p = 0; p < kc; ++p) {
    const float* col = a.data + i * a.row_stride + (p0 + p) * a.col_stride;
    for (int64_t r = 0; r < rows; ++r) out[p * rows + r] = col[r * a.row_stride];
  }
}

void run_block(const GemmKernels& K, const Product& q, int64_t i0, int64_t i1, int64_t j0,
               int64_t j1) {
  // A row-major A is read in place (mr rows, each contiguous); another layout is packed.
  const bool direct = q.a.col_stride == 1;
  float* packed = thread_scratch<float, struct GemmPackTag>(static_cast<size_t>(kDepth * K.mr));
  for (int64_t p0 = 0; p0 < q.k; p0 += kDepth) {
    const int64_t kc = std::min(kDepth, q.k - p0);
    for (int64_t i = i0; i < i1; i += K.mr) {
      const int64_t rows = std::min(K.mr, i1 - i);
      const float* a = q.a.data + i * q.a.row_stride + p0;
      int64_t a_rs = q.a.row_stride, a_cs = 1;
      if (!direct) {
        pack_a(q.a, i, rows, p0, kc, packed);
        a = packed, a_rs = 1, a_cs = rows;
      }
      for (int64_t j = j0; j < j1; j += K.nr) {
        K.tile(rows, std::min(K.nr, j1 - j), kc, a, a_rs, a_cs, q.b + p0 * q.ldb + j, q.ldb,
               q.c + i * q.ldc + j, q.ldc);
      }
    }
  }
}

}  // namespace

void gemm_acc(int64_t m, int64_t n, int64_t k, GemmA a, const float* b, int64_t ldb, float* c,
              int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  const GemmKernels& K = kernels();
  const Product q{m, n, k, a, b, ldb, c, ldc};
  const bool threaded =
      m * n * k >= (int64_t{1} << 18) && !ThreadPool::on_worker() && thread_pool().size() > 1;
  const int64_t task_rows = threaded ? K.mr * kTilesPerTask : m;
  const int64_t row_blocks = (m + task_rows - 1) / task_rows;
  const int64_t col_blocks = (n + kBlockCols - 1) / kBlockCols;
  parallel_for(row_blocks * col_blocks, threaded, [&](int64_t t) {
    const int64_t i0 = (t / col_blocks) * task_rows, j0 = (t % col_blocks) * kBlockCols;
    run_block(K, q, i0, std::min(m, i0 + task_rows), j0, std::min(n, j0 + kBlockCols));
  });
}

void gemm_acc_ref(int64_t m, int64_t n, int64_t k, GemmA a, const float* b, int64_t ldb, float* c,
                  int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = c[i * ldc + j];
      for (int64_t p = 0; p < k; ++p)
        s += double(a.data[i * a.row_stride + p * a.col_stride]) * double(b[p * ldb + j]);
      c[i * ldc + j] = static_cast<float>(s);
    }
  }
}

const char* gemm_isa() { return kernels().isa; }

}  // namespace k3
