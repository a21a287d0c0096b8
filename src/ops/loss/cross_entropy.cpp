#include "ops/loss/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace k3 {
namespace {

void check_targets(const int64_t* targets, int64_t T, int64_t V) {
  for (int64_t t = 0; t < T; ++t) {
    check(targets[t] >= 0 && targets[t] < V, "cross_entropy: target ", targets[t], " at row ", t,
          " is outside the vocabulary [0, ", V, ")");
  }
}

// log Σ e^{x} of one row, max-shifted, in F.
template <typename F>
F log_sum_exp(const float* x, int64_t V) {
  const F mx = *std::max_element(x, x + V);
  F sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<F>(x[v]) - mx);
  return mx + std::log(sum);
}

}  // namespace

void cross_entropy(const float* logits, const int64_t* targets, int64_t T, int64_t V, float* loss) {
  check_targets(targets, T, V);
  parallel_for(T, T * V > (int64_t{1} << 15), [&](int64_t t) {
    const float* x = logits + t * V;
    loss[t] = static_cast<float>(log_sum_exp<double>(x, V) - x[targets[t]]);
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
    const double lse = log_sum_exp<double>(x, V);
    float* d = dlogits + t * V;
    for (int64_t v = 0; v < V; ++v) {
      const double p = std::exp(double(x[v]) - lse) - (v == targets[t] ? 1.0 : 0.0);
      d[v] += static_cast<float>(dloss[t] * p);
    }
  });
}

const OpTable<CrossEntropyFn, CrossEntropyBwdFn> kCrossEntropyOp =
    register_op<CrossEntropyFn, CrossEntropyBwdFn>({.name = "cross_entropy",
                                                    .ref = cross_entropy_ref,
                                                    .cpu = cross_entropy,
                                                    .bwd = cross_entropy_bwd});

}  // namespace k3
