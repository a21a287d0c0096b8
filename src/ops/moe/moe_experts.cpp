#include "ops/moe/moe_experts.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/scratch.h"
#include "ops/moe/moe_combine.h"
#include "ops/moe/moe_experts_decode.h"

namespace k3 {
namespace {

// The T*k choices grouped by expert (a stable counting sort): expert e's choices are
// order[start[e] … start[e+1]), each a flat index t*k + j.
struct Groups {
  int64_t* start;  // [E+1]
  int64_t* order;  // [T*k]
};

Groups group_by_expert(const int32_t* sel, int64_t n, int64_t E) {
  Groups g{thread_scratch<int64_t, struct MoeStartTag>(E + 1),
           thread_scratch<int64_t, struct MoeOrderTag>(n)};
  int64_t* fill = thread_scratch<int64_t, struct MoeFillTag>(E);
  std::fill(g.start, g.start + E + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++g.start[sel[i] + 1];
  for (int64_t e = 0; e < E; ++e) g.start[e + 1] += g.start[e];
  std::copy_n(g.start, E, fill);
  for (int64_t i = 0; i < n; ++i) g.order[fill[sel[i]]++] = i;
  return g;
}

}  // namespace

void moe_experts(const float* z, const int32_t* sel, const float* weight, const ExpertMats* experts,
                 MoeExpertsShape s, float* c) {
  if (moe_experts_decode(z, sel, weight, experts, s, c)) return;  // one or two tokens
  const int64_t L = experts[0].gate.cols, I = experts[0].gate.rows;
  std::fill_n(c, s.T * L, 0.0f);
  const Groups g = group_by_expert(sel, s.T * s.k, s.E);
  int64_t most = 0;
  for (int64_t e = 0; e < s.E; ++e) most = std::max(most, g.start[e + 1] - g.start[e]);
  float* zin = thread_scratch<float, struct MoeZinTag>(most * L);  // [n, L]
  float* a = thread_scratch<float, struct MoeATag>(most * I);      // [n, I]
  float* b = thread_scratch<float, struct MoeBTag>(most * I);      // [n, I]
  float* y = thread_scratch<float, struct MoeYTag>(most * L);      // [n, L]
  for (int64_t e = 0; e < s.E; ++e) {
    const int64_t* rows = g.order + g.start[e];
    const int64_t n = g.start[e + 1] - g.start[e];
    if (n == 0) continue;
    const ExpertMats& w = experts[e];
    gather_choice_rows(z, rows, n, s.k, L, zin);
    linear(zin, n, w.gate, a);
    linear(zin, n, w.up, b);
    situ_glu(a, b, n * I, s.situ, a);
    linear(a, n, w.down, y);
    moe_scatter_add(y, rows, weight, n, s.k, L, c);
  }
}

void moe_experts_ref(const float* z, const int32_t* sel, const float* weight,
                     const ExpertMats* experts, MoeExpertsShape s, float* c) {
  const int64_t L = experts[0].gate.cols, I = experts[0].gate.rows;
  std::vector<float> wrow(static_cast<size_t>(std::max(L, I)));
  std::vector<double> h(static_cast<size_t>(I)), acc(static_cast<size_t>(L));
  for (int64_t t = 0; t < s.T; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const float* zt = z + t * L;
    for (int64_t j = 0; j < s.k; ++j) {
      const ExpertMats& w = experts[sel[t * s.k + j]];
      for (int64_t r = 0; r < I; ++r) {
        double ga = 0, up = 0;
        mat_row(w.gate, r, wrow.data());
        for (int64_t i = 0; i < L; ++i) ga += double(wrow[i]) * zt[i];
        mat_row(w.up, r, wrow.data());
        for (int64_t i = 0; i < L; ++i) up += double(wrow[i]) * zt[i];
        h[r] = situ_glu_ref(ga, up, s.situ);
      }
      for (int64_t r = 0; r < L; ++r) {
        mat_row(w.down, r, wrow.data());
        double d = 0;
        for (int64_t i = 0; i < I; ++i) d += double(wrow[i]) * h[i];
        acc[r] += double(weight[t * s.k + j]) * d;
      }
    }
    for (int64_t r = 0; r < L; ++r) c[t * L + r] = static_cast<float>(acc[r]);
  }
}

const OpTable<MoeExpertsFn> kMoeExpertsOp =
    register_op<MoeExpertsFn>({.name = "moe_experts",
                               .ref = moe_experts_ref,
                               .cpu = moe_experts,
                               .cuda = K3_CUDA_IMPL(moe_experts_cuda)});

}  // namespace k3
