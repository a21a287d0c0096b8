// Strided copy: dst[i0, i1, i2, i3] = src[i0, i1, i2, i3] over a shape of up to 4 dimensions,
// each side with its own strides (in elements). A source stride of 0 repeats (broadcasts) the
// same elements along that dimension. This is the one op for moving activations between
// layouts: slices, head splits, concatenations, broadcasting a shared key to every head.
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

struct CopyShape {
  int64_t shape[4] = {1, 1, 1, 1};  // outermost first; unused leading dims are 1
  int64_t src_stride[4] = {0, 0, 0, 0};
  int64_t dst_stride[4] = {0, 0, 0, 0};
};

// Destinations must not overlap each other or the source (a broadcast source may repeat).
void copy_strided(const float* src, CopyShape s, float* dst);
void copy_strided_ref(const float* src, CopyShape s, float* dst);

using CopyFn = void(const float* src, CopyShape s, float* dst);
// Backward: dsrc[i…] += ddst[i…] (a broadcast source sums every copy it made).
using CopyBwdFn = void(const float* ddst, CopyShape s, float* dsrc);
extern const OpTable<CopyFn, CopyBwdFn> kCopyOp;
void copy_strided_bwd(const float* ddst, CopyShape s, float* dsrc);

// dst_rows[i][0 … width) = src[i, :] for i < n: the rows of src [n, width] to n separate places
// (a step's new latent rows into their sequences' cache blocks: one call, one launch on the
// device, where a copy per sequence made 64 launches a decode step). Destinations must not
// overlap each other or src. Exact, so the reference is the plain loop.
using ScatterRowsFn = void(const float* src, int64_t n, int64_t width, float* const* dst_rows);
extern const OpTable<ScatterRowsFn> kScatterRowsOp;  // "scatter_rows"
void scatter_rows(const float* src, int64_t n, int64_t width, float* const* dst_rows);
void scatter_rows_ref(const float* src, int64_t n, int64_t width, float* const* dst_rows);

}  // namespace k3
