#include "ops/loss/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fast_math.h"
#include "core/parallel.h"
#include "core/scratch.h"

namespace k3 {
namespace {

void check_targets(const int64_t* targets, int64_t T, int64_t V) {
  for (int64_t t = 0; t < T; ++t) {
    check(targets[t] >= 0 && targets[t] < V, "cross_entropy: target ", targets[t], " at row ", t,
          " is outside the vocabulary [0, ", V, ")");
  }
}

// Σ_v e^{x_v − mx} of one row (mx its maximum), the exponentials kept in e[V]: each in float
// (core/fast_math.h, within 3 ulp; the shift keeps it in (0, 1]; a loop that vectorises),
// then summed in double.
double shifted_exp_sum(const float* x, int64_t V, float mx, float* e) {
  for (int64_t v = 0; v < V; ++v) e[v] = exp_fast(x[v] - mx);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += e[v];
  return sum;
}

}  // namespace

void cross_entropy(const float* logits, const int64_t* targets, int64_t T, int64_t V, float* loss) {
  check_targets(targets, T, V);
  parallel_for(T, T * V > (int64_t{1} << 15), [&](int64_t t) {
    const float* x = logits + t * V;
    float* e = thread_scratch<float, struct SoftmaxTag>(static_cast<size_t>(V));  // [V]
    const float mx = *std::max_element(x, x + V);
    loss[t] =
        static_cast<float>(mx + std::log(shifted_exp_sum(x, V, mx, e)) - double(x[targets[t]]));
  });
}

void cross_entropy_ref(const float* logits, const int64_t* targets, int64_t T, int64_t V,
                       float* loss) {
  check_targets(targets, T, V);
  for (int64_t t = 0; t < T; ++t) {  // the definition: −log softmax(x)[target]
    const float* x = logits + t * V;
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(x[v]) - x[targets[t]]);
    loss[t] = static_cast<float>(std::log(sum));
  }
}

void cross_entropy_bwd(const float* logits, const int64_t* targets, int64_t T, int64_t V,
                       const float* dloss, float* dlogits) {
  check_targets(targets, T, V);
  parallel_for(T, T * V > (int64_t{1} << 15), [&](int64_t t) {
    const float* x = logits + t * V;
    float* e = thread_scratch<float, struct SoftmaxTag>(static_cast<size_t>(V));  // [V]
    const float mx = *std::max_element(x, x + V);
    const float scale = static_cast<float>(dloss[t] / shifted_exp_sum(x, V, mx, e));
    float* d = dlogits + t * V;
    for (int64_t v = 0; v < V; ++v) d[v] += scale * e[v];  // dloss · softmax
    d[targets[t]] -= dloss[t];
  });
}

const OpTable<CrossEntropyFn, CrossEntropyBwdFn> kCrossEntropyOp =
    register_op<CrossEntropyFn, CrossEntropyBwdFn>({.name = "cross_entropy",
                                                    .ref = cross_entropy_ref,
                                                    .cpu = cross_entropy,
                                                    .bwd = cross_entropy_bwd});

}  // namespace k3
