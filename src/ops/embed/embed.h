// Embedding lookup: out[t] = table[ids[t]] widened to fp32 (exact for BF16/F32/MXFP4 tables).
#pragma once

#include <cstdint>

#include "ops/linear/linear.h"

namespace k3 {

// table [V, d], ids [T] (host array, already validated) -> out [T, d].
using EmbedFn = void(const Mat& table, const int64_t* ids, int64_t T, float* out);
extern const OpTable<EmbedFn> kEmbedOp;  // "embed": ref embed_rows (exact, no faster cpu form)

void embed_rows(const Mat& table, const int64_t* ids, int64_t T, float* out);

}  // namespace k3
