#include "ops/moe/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace k3 {

void route_token(const float* logits, const float* bias, RouterParams p, int32_t* sel,
                 float* weight) {
  std::vector<float> score(static_cast<size_t>(p.n_expert));
  std::vector<int32_t> order(static_cast<size_t>(p.n_expert));
  for (int64_t e = 0; e < p.n_expert; ++e) score[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + p.top_k, order.end(), [&](int32_t a, int32_t b) {
    const float sa = score[a] + bias[a], sb = score[b] + bias[b];
    return sa > sb || (sa == sb && a < b);
  });
  std::sort(order.begin(), order.begin() + p.top_k);
  double sum = 0;
  for (int64_t i = 0; i < p.top_k; ++i) sum += score[order[i]];
  const bool renorm = p.renormalize && p.top_k > 1;
  for (int64_t i = 0; i < p.top_k; ++i) {
    sel[i] = order[i];
    const double w = renorm ? score[order[i]] / (sum + 1e-20) : score[order[i]];
    weight[i] = static_cast<float>(w) * p.scale;
  }
}

}  // namespace k3
