// Embedding lookup: out[t] = table[ids[t]] widened to fp32 (exact for BF16/F32/MXFP4 tables).
#pragma once

#include <cstdint>

#include "ops/linear/linear.h"

namespace k3 {

// table [V, d], ids [T] (host array, already validated) -> out [T, d].
using EmbedFn = void(const Mat& table, const int64_t* ids, int64_t T, float* out);
// Backward (training, fp32 tables): dtable[ids[t]] += dout[t] for every t (repeats summed).
using EmbedBwdFn = void(const int64_t* ids, int64_t T, int64_t d, const float* dout, float* dtable);
extern const OpTable<EmbedFn, EmbedBwdFn> kEmbedOp;  // "embed": ref embed_rows (exact), bwd
void embed_rows_bwd(const int64_t* ids, int64_t T, int64_t d, const float* dout, float* dtable);

void embed_rows(const Mat& table, const int64_t* ids, int64_t T, float* out);

}  // namespace k3
