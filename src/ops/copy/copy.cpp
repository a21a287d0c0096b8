#include "ops/copy/copy.h"

#include <algorithm>

#include "backend/cuda/launchers.h"
#include "core/parallel.h"

namespace k3 {

void copy_strided(const float* src, CopyShape s, float* dst) {
  const int64_t n0 = s.shape[0], n1 = s.shape[1], n2 = s.shape[2], n3 = s.shape[3];
  const bool rows_contiguous = s.src_stride[3] == 1 && s.dst_stride[3] == 1;
  // Outer rows in parallel only when there is enough to move.
  parallel_for(n0 * n1, n0 * n1 * n2 * n3 > (int64_t{1} << 16), [&](int64_t r) {
    const int64_t i0 = r / n1, i1 = r % n1;
    const float* sp = src + i0 * s.src_stride[0] + i1 * s.src_stride[1];
    float* dp = dst + i0 * s.dst_stride[0] + i1 * s.dst_stride[1];
    for (int64_t i2 = 0; i2 < n2; ++i2) {
      const float* a = sp + i2 * s.src_stride[2];
      float* b = dp + i2 * s.dst_stride[2];
      if (rows_contiguous) {
        std::copy_n(a, n3, b);
      } else {
        for (int64_t i3 = 0; i3 < n3; ++i3) b[i3 * s.dst_stride[3]] = a[i3 * s.src_stride[3]];
      }
    }
  });
}

void copy_strided_ref(const float* src, CopyShape s, float* dst) {
  for (int64_t i0 = 0; i0 < s.shape[0]; ++i0)
    for (int64_t i1 = 0; i1 < s.shape[1]; ++i1)
      for (int64_t i2 = 0; i2 < s.shape[2]; ++i2)
        for (int64_t i3 = 0; i3 < s.shape[3]; ++i3) {
          const int64_t at[4] = {i0, i1, i2, i3};
          int64_t so = 0, d = 0;
          for (int k = 0; k < 4; ++k) {
            so += at[k] * s.src_stride[k];
            d += at[k] * s.dst_stride[k];
          }
          dst[d] = src[so];
        }
}

void scatter_rows(const float* src, int64_t n, int64_t width, float* const* dst_rows) {
  parallel_for(n, n * width > (int64_t{1} << 16),
               [&](int64_t i) { std::copy_n(src + i * width, width, dst_rows[i]); });
}

void scatter_rows_ref(const float* src, int64_t n, int64_t width, float* const* dst_rows) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < width; ++j) dst_rows[i][j] = src[i * width + j];
}

const OpTable<ScatterRowsFn> kScatterRowsOp =
    register_op<ScatterRowsFn>({.name = "scatter_rows",
                                .ref = scatter_rows_ref,
                                .cpu = scatter_rows,
                                .cuda = K3_CUDA_IMPL(scatter_rows_cuda)});

const OpTable<CopyFn, CopyBwdFn> kCopyOp =
    register_op<CopyFn, CopyBwdFn>({.name = "copy",
                                    .ref = copy_strided_ref,
                                    .cpu = copy_strided,
                                    .cuda = K3_CUDA_IMPL(copy_cuda),
                                    .bwd = copy_strided_bwd});

}  // namespace k3
