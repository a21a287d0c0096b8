// The expanded MLA attention of a prompt in bf16 precision (core/precision.h) on the tensor
// cores (mla_prefill.cu), used by mla_expanded_cuda (mla.cu): flash-style, q, k, v rounded
// once to bf16, scores and the online softmax in fp32, P rounded to bf16 for P·V, fp32
// accumulation (about 2e-3 relative error; its own test).
#pragma once

#include "ops/mla/mla.h"

namespace k3::cuda {

// Whether the kernel takes these widths (Dn + Dr = 192, Dv = 128: the K3 heads).
bool mla_prefill_bf16_supported(const MlaShape& s);
// o [T, H, Dv] from q [T, H, Dq], k [S, H, Dq], v [S, H, Dv] (device pointers; S = n_past + T,
// query t sees keys 0 … n_past + t).
void mla_prefill_bf16(const float* q, const float* k, const float* v, const MlaShape& s, float* o);

}  // namespace k3::cuda
