// Backwards of the routed experts' data movement: the gathers scatter their rows' gradients
// back (in order), and the weighted scatter-add c[choice/k] += weight[choice] · y[i] gives
// dy[i] += weight · dc[t] and dweight[choice] += dc[t] · y[i].
#include "ops/moe/moe_combine.h"

namespace k3 {

void gather_rows_bwd(const float* ddst, const int64_t* rows, int64_t n, int64_t width,
                     float* dsrc) {
  for (int64_t i = 0; i < n; ++i) {
    float* d = dsrc + rows[i] * width;
    for (int64_t j = 0; j < width; ++j) d[j] += ddst[i * width + j];
  }
}

void gather_choice_rows_bwd(const float* ddst, const int64_t* choice, int64_t n, int64_t k,
                            int64_t width, float* dsrc) {
  for (int64_t i = 0; i < n; ++i) {
    float* d = dsrc + (choice[i] / k) * width;
    for (int64_t j = 0; j < width; ++j) d[j] += ddst[i * width + j];
  }
}

void moe_scatter_add_bwd(const float* y, const int64_t* choice, const float* weight, int64_t n,
                         int64_t k, int64_t width, const float* dc, float* dy, float* dweight) {
  for (int64_t i = 0; i < n; ++i) {
    const float* g = dc + (choice[i] / k) * width;
    const float wgt = weight[choice[i]];
    double dwt = 0;
    for (int64_t j = 0; j < width; ++j) {
      if (dy != nullptr) dy[i * width + j] += wgt * g[j];
      dwt += double(g[j]) * y[i * width + j];
    }
    if (dweight != nullptr) dweight[choice[i]] += static_cast<float>(dwt);
  }
}

}  // namespace k3
