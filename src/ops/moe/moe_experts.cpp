#include "ops/moe/moe_experts.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/moe/moe_combine.h"

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

// Experts run in waves: every expert of a wave at once, one per thread (each its GLU over all
// the tokens that chose it, its linears on that thread), their outputs kept apart [n_e, L];
// then the wave's outputs are added into c one expert after another, in expert order, as the
// one-expert-at-a-time loop did (the same sums in the same order: results do not depend on
// the thread count). A wave holds at most kWaveFloats of outputs (or one expert), so a long
// prompt does not need a [T·k, L] buffer.
constexpr int64_t kWaveFloats = int64_t{1} << 21;  // 8 MiB

struct ExpertRun {
  const float* z;
  const ExpertMats* experts;
  MoeExpertsShape s;
  int64_t L, I, most;
  Groups g;
};

// Expert e's GLU over its rows -> y [n_e, L].
void run_expert(const ExpertRun& r, int64_t e, float* y) {
  const int64_t* rows = r.g.order + r.g.start[e];
  const int64_t n = r.g.start[e + 1] - r.g.start[e];
  const ExpertMats& w = r.experts[e];
  float* zin = thread_scratch<float, struct MoeZinTag>(r.most * r.L);  // [n, L]
  float* a = thread_scratch<float, struct MoeATag>(r.most * r.I);      // [n, I]
  float* b = thread_scratch<float, struct MoeBTag>(r.most * r.I);      // [n, I]
  gather_choice_rows(r.z, rows, n, r.s.k, r.L, zin);
  linear(zin, n, w.gate, a);
  linear(zin, n, w.up, b);
  situ_glu(a, b, n * r.I, r.s.situ, a);
  linear(a, n, w.down, y);
}

}  // namespace

void moe_experts(const float* z, const int32_t* sel, const float* weight, const ExpertMats* experts,
                 MoeExpertsShape s, float* c) {
  const int64_t L = experts[0].gate.cols, I = experts[0].gate.rows;
  std::fill_n(c, s.T * L, 0.0f);
  const Groups g = group_by_expert(sel, s.T * s.k, s.E);
  int64_t most = 0, used = 0;
  for (int64_t e = 0; e < s.E; ++e) {
    most = std::max(most, g.start[e + 1] - g.start[e]);
    used += g.start[e + 1] > g.start[e];
  }
  const ExpertRun r{z, experts, s, L, I, most, g};
  // Across experts when there are enough to keep every thread busy; else each expert's
  // linears split their rows over the threads (as with one expert per token at decode).
  const bool across = used >= 2 * thread_pool().size() && s.T * s.k * L * I >= 32768;
  const int64_t wave_rows = across ? std::max(most, kWaveFloats / L) : most;
  float* y = thread_scratch<float, struct MoeYTag>(std::min(wave_rows, s.T * s.k) * L);
  for (int64_t e0 = 0; e0 < s.E;) {
    int64_t e1 = e0 + 1;  // the wave [e0, e1): its rows fit wave_rows
    while (e1 < s.E && g.start[e1 + 1] - g.start[e0] <= wave_rows) ++e1;
    const int64_t base = g.start[e0];
    parallel_for(e1 - e0, across, [&](int64_t i) {
      const int64_t e = e0 + i;
      if (g.start[e + 1] > g.start[e]) run_expert(r, e, y + (g.start[e] - base) * L);
    });
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t n = g.start[e + 1] - g.start[e];
      if (n > 0)
        moe_scatter_add(y + (g.start[e] - base) * L, g.order + g.start[e], weight, n, s.k, L, c);
    }
    e0 = e1;
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
