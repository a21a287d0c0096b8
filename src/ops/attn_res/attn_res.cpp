#include "ops/attn_res/attn_res.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/scratch.h"

namespace k3 {
namespace {

template <typename F>
void mix(const float* const* cands, AttnResShape s, const float* w, float eps, float* out) {
  check(s.n >= 1, "attn_res_mix: needs at least one candidate");
  parallel_for(s.T, s.T > 1, [&](int64_t t) {
    F* score = thread_scratch<F, struct AttnResScoreTag>(static_cast<size_t>(s.n));
    F mx = -INFINITY;
    for (int64_t i = 0; i < s.n; ++i) {
      const float* v = cands[i] + t * s.d;
      F ss = 0, dot = 0;
      for (int64_t j = 0; j < s.d; ++j) {
        ss += static_cast<F>(v[j]) * v[j];
        dot += static_cast<F>(v[j]) * w[j];
      }
      score[i] = dot / std::sqrt(ss / static_cast<F>(s.d) + static_cast<F>(eps));
      mx = std::max(mx, score[i]);
    }
    F sum = 0;
    for (int64_t i = 0; i < s.n; ++i) sum += (score[i] = std::exp(score[i] - mx));
    float* o = out + t * s.d;
    for (int64_t j = 0; j < s.d; ++j) {
      F acc = 0;
      for (int64_t i = 0; i < s.n; ++i) acc += score[i] * static_cast<F>(cands[i][t * s.d + j]);
      o[j] = static_cast<float>(acc / sum);
    }
  });
}

}  // namespace

void attn_res_mix(const float* const* cands, AttnResShape s, const float* w, float eps,
                  float* out) {
  mix<float>(cands, s, w, eps, out);
}

void attn_res_mix_ref(const float* const* cands, AttnResShape s, const float* w, float eps,
                      float* out) {
  mix<double>(cands, s, w, eps, out);
}

const OpTable<AttnResMixFn, AttnResMixBwdFn> kAttnResMixOp =
    register_op<AttnResMixFn, AttnResMixBwdFn>({.name = "attn_res_mix",
                                                .ref = attn_res_mix_ref,
                                                .cpu = attn_res_mix,
                                                .cuda = K3_CUDA_IMPL(attn_res_mix_cuda),
                                                .bwd = attn_res_mix_bwd});

}  // namespace k3
