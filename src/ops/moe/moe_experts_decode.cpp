// A decode step's routed experts: the T*k chosen experts' gate and up rows are split over one
// parallel loop, their down rows over a second. moe_experts runs three linears per chosen expert,
// each its own parallel loop on a matrix of a few hundred KB: at -t 2 that is 12 hand-offs per
// layer on K3-small. Every row is computed by linear on a row view of its matrix (the same kernel
// as linear on the whole matrix: each output's summation order is fixed per row), and the
// outputs are added into c in expert order as moe_experts adds them, so the result is identical.
#include "ops/moe/moe_experts_decode.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/linear/linear.h"
#include "ops/moe/moe_combine.h"

namespace k3 {
namespace {

constexpr int64_t kTaskRows = 16;    // weight rows per task
constexpr int64_t kMaxChoices = 64;  // T*k bound of the fixed arrays below

// Rows [r0, r0 + nr) of w as a matrix of their own.
Mat row_range(const Mat& w, int64_t r0, int64_t nr) {
  Mat v = w;
  v.rows = nr;
  if (w.format == MatFormat::mxfp4) {
    v.data = static_cast<const uint8_t*>(w.data) + r0 * (w.cols / 2);
    v.scales = w.scales + r0 * (w.cols / 32);
  } else {
    const int64_t elem = w.format == MatFormat::bf16 ? 2 : 4;
    v.data = static_cast<const uint8_t*>(w.data) + r0 * w.cols * elem;
  }
  return v;
}

// y[t, r0 .. r0+nr) of x [n, w.cols] · wᵀ, y [n, w.rows].
void rows_of(const float* x, int64_t n, const Mat& w, int64_t r0, int64_t nr, float* y) {
  float* out = thread_scratch<float, struct MoeDecodeRowsTag>(n * nr);  // [n, nr]
  linear(x, n, row_range(w, r0, nr), out);
  for (int64_t t = 0; t < n; ++t) std::memcpy(y + t * w.rows + r0, out + t * nr, nr * 4);
}

struct Used {  // one chosen expert: its choices (flat t*k + j) and its rows in the buffers
  int64_t e, first, n;
};

}  // namespace

bool moe_experts_decode(const float* z, const int32_t* sel, const float* weight,
                        const ExpertMats* experts, MoeExpertsShape s, float* c) {
  const int64_t n_choices = s.T * s.k;
  if (s.T > kMoeDecodeMaxTokens || n_choices > kMaxChoices) return false;
  const int64_t L = experts[0].gate.cols, I = experts[0].gate.rows;
  std::fill_n(c, s.T * L, 0.0f);
  // The choices grouped by expert, ascending, stable (moe_experts' counting sort): an insertion
  // sort of at most 64 entries, which unlike std::stable_sort allocates nothing (decode steps
  // make no heap allocations: tests/engine/test_step_allocs.cpp).
  int64_t order[kMaxChoices];
  for (int64_t i = 0; i < n_choices; ++i) {
    int64_t j = i;
    for (; j > 0 && sel[order[j - 1]] > sel[i]; --j) order[j] = order[j - 1];
    order[j] = i;
  }
  Used used[kMaxChoices];
  int64_t n_used = 0;
  for (int64_t i = 0; i < n_choices; ++i) {
    if (n_used > 0 && sel[order[i]] == used[n_used - 1].e) {
      ++used[n_used - 1].n;
      continue;
    }
    used[n_used++] = {sel[order[i]], i, 1};
  }
  float* zin = thread_scratch<float, struct MoeDecodeZinTag>(n_choices * L);  // [n_choices, L]
  float* a = thread_scratch<float, struct MoeDecodeATag>(n_choices * I);      // [n_choices, I]
  float* b = thread_scratch<float, struct MoeDecodeBTag>(n_choices * I);      // [n_choices, I]
  float* y = thread_scratch<float, struct MoeDecodeYTag>(n_choices * L);      // [n_choices, L]
  gather_choice_rows(z, order, n_choices, s.k, L, zin);
  // q8 precision: each choice's input row quantised once for its gate and up rows (and its
  // hidden row once for the down rows), rather than once per 16-row task.
  const ExpertMats& e0 = experts[n_used > 0 ? used[0].e : 0];
  const bool q8_in = n_used > 0 && linear_takes_q8(e0.gate) && linear_takes_q8(e0.up);
  const bool q8_out = n_used > 0 && linear_takes_q8(e0.down);
  const int64_t zrb = q8_row_bytes(L), arb = q8_row_bytes(I);
  uint8_t* zq = q8_in ? thread_scratch<uint8_t, struct MoeDecodeZqTag>(n_choices * zrb) : nullptr;
  uint8_t* aq = q8_out ? thread_scratch<uint8_t, struct MoeDecodeAqTag>(n_choices * arb) : nullptr;
  if (q8_in) q8_quantize(zin, n_choices, L, zq);

  const int64_t in_blocks = (I + kTaskRows - 1) / kTaskRows;
  const int64_t out_blocks = (L + kTaskRows - 1) / kTaskRows;
  // Tiny experts (the default model's 128 x 256) stay on one thread, as linear's decode GEMVs.
  const bool worth_it =
      worth_splitting(n_used * 3 * I * L * s.T, int64_t{1} << 20, int64_t{1} << 22);
  parallel_for(n_used * 2 * in_blocks, worth_it, [&](int64_t task) {  // gate and up rows
    const Used& u = used[task / (2 * in_blocks)];
    const bool is_up = (task / in_blocks) % 2 == 1;
    const int64_t r0 = (task % in_blocks) * kTaskRows, nr = std::min(kTaskRows, I - r0);
    const ExpertMats& w = experts[u.e];
    const Mat& m = is_up ? w.up : w.gate;
    float* out = (is_up ? b : a) + u.first * I;
    if (q8_in && linear_takes_q8(m)) {
      linear_q8_rows(zq + u.first * zrb, u.n, m, r0, nr, out, I);
    } else {
      rows_of(zin + u.first * L, u.n, m, r0, nr, out);
    }
  });
  for (int64_t i = 0; i < n_used; ++i) {
    const Used& u = used[i];
    situ_glu(a + u.first * I, b + u.first * I, u.n * I, s.situ, a + u.first * I);
  }
  if (q8_out) q8_quantize(a, n_choices, I, aq);
  parallel_for(n_used * out_blocks, worth_it, [&](int64_t task) {  // down rows
    const Used& u = used[task / out_blocks];
    const int64_t r0 = (task % out_blocks) * kTaskRows, nr = std::min(kTaskRows, L - r0);
    const Mat& m = experts[u.e].down;
    if (q8_out && linear_takes_q8(m)) {
      linear_q8_rows(aq + u.first * arb, u.n, m, r0, nr, y + u.first * L, L);
    } else {
      rows_of(a + u.first * I, u.n, m, r0, nr, y + u.first * L);
    }
  });
  for (int64_t i = 0; i < n_used; ++i) {
    const Used& u = used[i];
    moe_scatter_add(y + u.first * L, order + u.first, weight, u.n, s.k, L, c);
  }
  return true;
}

}  // namespace k3
