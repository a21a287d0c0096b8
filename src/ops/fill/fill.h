// y[0 … n) = value (zeroing a combine buffer on any device).
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

using FillFn = void(float* y, int64_t n, float value);
extern const OpTable<FillFn> kFillOp;  // "fill": ref fill_ref

void fill_ref(float* y, int64_t n, float value);

}  // namespace k3
