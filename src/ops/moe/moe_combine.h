// The routed experts' data movement around their GLUs (spec §6): gather each expert's input
// rows, and add its weighted outputs back into the per-token fp32 combine. Routing choices are
// flat indices t*k + j into the [T, k] routing arrays, so the token of choice i is choice[i]/k.
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

// src [*, width], rows [n] -> dst [n, width]: dst[i] = src[rows[i]].
using GatherRowsFn = void(const float* src, const int64_t* rows, int64_t n, int64_t width,
                          float* dst);
// src [T, width], choice [n] -> dst [n, width]: dst[i] = src[choice[i] / k].
using GatherChoiceRowsFn = void(const float* src, const int64_t* choice, int64_t n, int64_t k,
                                int64_t width, float* dst);
// y [n, width], choice [n], weight [T*k], c [T, width] in/out:
//   for i = 0 … n-1 in order: c[choice[i] / k] += weight[choice[i]] · y[i].
using MoeScatterAddFn = void(const float* y, const int64_t* choice, const float* weight, int64_t n,
                             int64_t k, int64_t width, float* c);

// Backwards (moe_combine_bwd.cpp): the gathers scatter-add ddst [n, width] into dsrc (so
// gather_rows over an embedding table is the embedding backward); moe_scatter_add adds
// dy [n, width] and dweight [T*k] given dc [T, width].
using GatherRowsBwdFn = void(const float* ddst, const int64_t* rows, int64_t n, int64_t width,
                             float* dsrc);
using GatherChoiceRowsBwdFn = void(const float* ddst, const int64_t* choice, int64_t n, int64_t k,
                                   int64_t width, float* dsrc);
using MoeScatterAddBwdFn = void(const float* y, const int64_t* choice, const float* weight,
                                int64_t n, int64_t k, int64_t width, const float* dc, float* dy,
                                float* dweight);

extern const OpTable<GatherRowsFn, GatherRowsBwdFn> kGatherRowsOp;  // "gather_rows"
extern const OpTable<GatherChoiceRowsFn, GatherChoiceRowsBwdFn>
    kGatherChoiceRowsOp;                                                     // "gather_choice_rows"
extern const OpTable<MoeScatterAddFn, MoeScatterAddBwdFn> kMoeScatterAddOp;  // "moe_scatter_add"

void gather_rows_bwd(const float* ddst, const int64_t* rows, int64_t n, int64_t width, float* dsrc);
void gather_choice_rows_bwd(const float* ddst, const int64_t* choice, int64_t n, int64_t k,
                            int64_t width, float* dsrc);
void moe_scatter_add_bwd(const float* y, const int64_t* choice, const float* weight, int64_t n,
                         int64_t k, int64_t width, const float* dc, float* dy, float* dweight);

void gather_rows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst);
void gather_choice_rows(const float* src, const int64_t* choice, int64_t n, int64_t k,
                        int64_t width, float* dst);
// fp32, each c element summed in choice order (the same arithmetic as the model's loop).
void moe_scatter_add(const float* y, const int64_t* choice, const float* weight, int64_t n,
                     int64_t k, int64_t width, float* c);

// Plain references (the gathers copy element by element; the sum is in double).
void gather_rows_ref(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst);
void gather_choice_rows_ref(const float* src, const int64_t* choice, int64_t n, int64_t k,
                            int64_t width, float* dst);
void moe_scatter_add_ref(const float* y, const int64_t* choice, const float* weight, int64_t n,
                         int64_t k, int64_t width, float* c);

}  // namespace k3
