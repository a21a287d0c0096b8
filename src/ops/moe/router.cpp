#include "ops/moe/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/parallel.h"
#include "core/scratch.h"

namespace k3 {

void route_token(const float* logits, const float* bias, RouterParams p, int32_t* sel,
                 float* weight) {
  float* score = thread_scratch<float, struct RouterScoreTag>(static_cast<size_t>(p.n_expert));
  int32_t* order = thread_scratch<int32_t, struct RouterOrderTag>(static_cast<size_t>(p.n_expert));
  for (int64_t e = 0; e < p.n_expert; ++e) score[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  std::iota(order, order + p.n_expert, 0);
  std::partial_sort(order, order + p.top_k, order + p.n_expert, [&](int32_t a, int32_t b) {
    const float sa = score[a] + bias[a], sb = score[b] + bias[b];
    return sa > sb || (sa == sb && a < b);
  });
  std::sort(order, order + p.top_k);
  double sum = 0;
  for (int64_t i = 0; i < p.top_k; ++i) sum += score[order[i]];
  const bool renorm = p.renormalize && p.top_k > 1;
  for (int64_t i = 0; i < p.top_k; ++i) {
    sel[i] = order[i];
    const double w = renorm ? score[order[i]] / (sum + 1e-20) : score[order[i]];
    weight[i] = static_cast<float>(w) * p.scale;
  }
}

void route_tokens(const float* logits, const float* bias, RouterParams p, int64_t T, int32_t* sel,
                  float* weight) {
  // route_token's scratch is per thread, so tokens route independently.
  parallel_for(T, T * p.n_expert > (int64_t{1} << 15), [&](int64_t t) {
    route_token(logits + t * p.n_expert, bias, p, sel + t * p.top_k, weight + t * p.top_k);
  });
}

void route_tokens_ref(const float* logits, const float* bias, RouterParams p, int64_t T,
                      int32_t* sel, float* weight) {
  const int64_t E = p.n_expert, k = p.top_k;
  std::vector<double> s(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) s[e] = 1.0 / (1.0 + std::exp(-double(logits[t * E + e])));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      const double sa = s[a] + bias[a], sb = s[b] + bias[b];
      return sa > sb || (sa == sb && a < b);
    });
    std::sort(order.begin(), order.begin() + k);
    double sum = 0;
    for (int64_t i = 0; i < k; ++i) sum += s[order[i]];
    for (int64_t i = 0; i < k; ++i) {
      const double w = p.renormalize && k > 1 ? s[order[i]] / sum : s[order[i]];
      sel[t * k + i] = order[i];
      weight[t * k + i] = static_cast<float>(w * p.scale);
    }
  }
}

const OpTable<RouterFn, RouterBwdFn> kRouterOp =
    register_op<RouterFn, RouterBwdFn>({.name = "router",
                                        .ref = route_tokens_ref,
                                        .cpu = route_tokens,
                                        .cuda = K3_CUDA_IMPL(router_cuda),
                                        .bwd = route_tokens_bwd});

}  // namespace k3
