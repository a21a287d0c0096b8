// Next-token cross-entropy on the LM head's logits (training), per row t:
//   loss[t] = log Σ_v e^{logits[t, v]} − logits[t, target[t]]
// Backward: dlogits[t] += dloss[t] · (softmax(logits[t]) − onehot(target[t])).
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

// logits [T, V], targets [T] (each in [0, V)) -> loss [T].
using CrossEntropyFn = void(const float* logits, const int64_t* targets, int64_t T, int64_t V,
                            float* loss);
// dloss [T] -> dlogits [T, V] (added).
using CrossEntropyBwdFn = void(const float* logits, const int64_t* targets, int64_t T, int64_t V,
                               const float* dloss, float* dlogits);
extern const OpTable<CrossEntropyFn, CrossEntropyBwdFn> kCrossEntropyOp;  // "cross_entropy"

void cross_entropy(const float* logits, const int64_t* targets, int64_t T, int64_t V, float* loss);
void cross_entropy_ref(const float* logits, const int64_t* targets, int64_t T, int64_t V,
                       float* loss);
void cross_entropy_bwd(const float* logits, const int64_t* targets, int64_t T, int64_t V,
                       const float* dloss, float* dlogits);

}  // namespace k3
