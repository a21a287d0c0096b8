#include "ops/fill/fill.h"

#include <algorithm>

#include "backend/cuda/launchers.h"

namespace k3 {

void fill_ref(float* y, int64_t n, float value) { std::fill_n(y, n, value); }

const OpTable<FillFn> kFillOp =
    register_op<FillFn>({.name = "fill", .ref = fill_ref, .cuda = K3_CUDA_IMPL(fill_cuda)});

}  // namespace k3
