#include "ops/attn_res/attn_res.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/norm/norm.h"

namespace k3 {
namespace {

// ss = Σ v², dot = Σ v·w, each in 8 independent partial sums (one running sum per total would
// be a chain of dependent adds, latency bound). The order depends on n alone.
template <typename F>
void square_and_dot(const float* v, const float* w, int64_t n, F& ss, F& dot) {
  F s[8] = {}, d[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int k = 0; k < 8; ++k) {
      s[k] += static_cast<F>(v[j + k]) * v[j + k];
      d[k] += static_cast<F>(v[j + k]) * w[j + k];
    }
  }
  ss = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  dot = ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
  for (; j < n; ++j) {
    ss += static_cast<F>(v[j]) * v[j];
    dot += static_cast<F>(v[j]) * w[j];
  }
}

template <typename F>
void mix(const float* const* cands, AttnResShape s, const float* w, float eps, float* out) {
  check(s.n >= 1, "attn_res_mix: needs at least one candidate");
  parallel_for(s.T, s.T > 1, [&](int64_t t) {
    F* score = thread_scratch<F, struct AttnResScoreTag>(static_cast<size_t>(s.n));
    F mx = -INFINITY;
    for (int64_t i = 0; i < s.n; ++i) {
      F ss = 0, dot = 0;
      square_and_dot<F>(cands[i] + t * s.d, w, s.d, ss, dot);
      score[i] = dot / std::sqrt(ss / static_cast<F>(s.d) + static_cast<F>(eps));
      mx = std::max(mx, score[i]);
    }
    F sum = 0;
    for (int64_t i = 0; i < s.n; ++i) sum += (score[i] = std::exp(score[i] - mx));
    // o = Σ_i score_i v_i / sum, candidate by candidate over the whole row (each o[j] sums in
    // candidate order, as one j at a time would; the row loop vectorises).
    F* acc = thread_scratch<F, struct AttnResAccTag>(static_cast<size_t>(s.d));
    std::fill(acc, acc + s.d, F(0));
    for (int64_t i = 0; i < s.n; ++i) {
      const float* v = cands[i] + t * s.d;
      const F si = score[i];
      for (int64_t j = 0; j < s.d; ++j) acc[j] += si * static_cast<F>(v[j]);
    }
    float* o = out + t * s.d;
    for (int64_t j = 0; j < s.d; ++j) o[j] = static_cast<float>(acc[j] / sum);
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

// attn_res_norm on the CPU and as the reference: the two ops in turn through a [T, d] buffer.
template <AttnResMixFn* kMix, bool kRef>
void mix_then_norm(const float* const* cands, AttnResShape s, const float* w, const float* w_norm,
                   float eps, float* out) {
  float* a = thread_scratch<float, struct AttnResNormTag>(static_cast<size_t>(s.T * s.d));
  kMix(cands, s, w, eps, a);
  (kRef ? kRmsNormOp.ref : kRmsNormOp.cpu)(a, s.T, s.d, w_norm, eps, out);
}

const OpTable<AttnResNormFn> kAttnResNormOp =
    register_op<AttnResNormFn>({.name = "attn_res_norm",
                                .ref = mix_then_norm<attn_res_mix_ref, true>,
                                .cpu = mix_then_norm<attn_res_mix, false>,
                                .cuda = K3_CUDA_IMPL(attn_res_norm_cuda)});

const OpTable<AttnResMixFn, AttnResMixBwdFn> kAttnResMixOp =
    register_op<AttnResMixFn, AttnResMixBwdFn>({.name = "attn_res_mix",
                                                .ref = attn_res_mix_ref,
                                                .cpu = attn_res_mix,
                                                .cuda = K3_CUDA_IMPL(attn_res_mix_cuda),
                                                .bwd = attn_res_mix_bwd});

}  // namespace k3
