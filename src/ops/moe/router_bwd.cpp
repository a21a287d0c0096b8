// Backward of the router weights through the selected sigmoid scores s = σ(logits); the
// top-k selection (by biased scores) is a fixed choice here. With Σ = Σ_sel s + 1e-20 (as the
// forward), w_j = scale · s_j / Σ when renormalising (k > 1), else scale · s_j:
//   ds_m = scale (dw_m / Σ − Σ_j dw_j s_j / Σ²)  or  scale · dw_m;  dlogit_m += ds_m s_m (1 − s_m).
#include <cmath>

#include "ops/moe/router.h"

namespace k3 {

void route_tokens_bwd(const float* logits, const int32_t* sel, RouterParams p, int64_t T,
                      const float* dweight, float* dlogits) {
  const int64_t E = p.n_expert, k = p.top_k;
  const bool renorm = p.renormalize && k > 1;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* st = sel + t * k;
    const float* dwt = dweight + t * k;
    auto score = [&](int64_t j) { return 1.0 / (1.0 + std::exp(-double(logits[t * E + st[j]]))); };
    double sum = 0, dws = 0;
    for (int64_t j = 0; j < k; ++j) {
      sum += score(j);
      dws += dwt[j] * score(j);
    }
    sum += 1e-20;
    for (int64_t j = 0; j < k; ++j) {
      const double sj = score(j);
      const double ds = renorm ? p.scale * (dwt[j] / sum - dws / (sum * sum)) : p.scale * dwt[j];
      dlogits[t * E + st[j]] += static_cast<float>(ds * sj * (1.0 - sj));
    }
  }
}

}  // namespace k3
