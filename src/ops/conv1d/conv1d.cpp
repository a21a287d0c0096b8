#include "ops/conv1d/conv1d.h"

#include <cmath>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/parallel.h"

namespace k3 {
namespace {
template <typename F>
F silu(F v) {
  return v / (F(1) + std::exp(-v));
}
}  // namespace

void causal_conv1d_silu(const float* x, const float* w, float* state, Conv1dShape s, float* y) {
  const int64_t H = s.W - 1;  // history length
  parallel_for(s.C, s.C * s.T > 4096, [&](int64_t c) {
    float* hist = state + c * H;
    const float* wc = w + c * s.W;
    for (int64_t t = 0; t < s.T; ++t) {
      const float cur = x[t * s.C + c];
      float acc = wc[H] * cur;
      for (int64_t j = 0; j < H; ++j) acc += wc[j] * hist[j];
      y[t * s.C + c] = silu(acc);
      for (int64_t j = 0; j + 1 < H; ++j) hist[j] = hist[j + 1];
      if (H > 0) hist[H - 1] = cur;
    }
  });
}

void causal_conv1d_silu_ref(const float* x, const float* w, float* state, Conv1dShape s, float* y) {
  const int64_t H = s.W - 1;
  for (int64_t c = 0; c < s.C; ++c) {
    std::vector<double> seq;  // history then the new inputs
    for (int64_t j = 0; j < H; ++j) seq.push_back(state[c * H + j]);
    for (int64_t t = 0; t < s.T; ++t) seq.push_back(x[t * s.C + c]);
    for (int64_t t = 0; t < s.T; ++t) {
      double acc = 0;
      for (int64_t j = 0; j < s.W; ++j) acc += static_cast<double>(w[c * s.W + j]) * seq[t + j];
      y[t * s.C + c] = static_cast<float>(silu(acc));
    }
    for (int64_t j = 0; j < H; ++j) state[c * H + j] = static_cast<float>(seq[s.T + j]);
  }
}

const OpTable<Conv1dSiluFn, Conv1dSiluBwdFn> kConv1dSiluOp =
    register_op<Conv1dSiluFn, Conv1dSiluBwdFn>({.name = "conv1d_silu",
                                                .ref = causal_conv1d_silu_ref,
                                                .cpu = causal_conv1d_silu,
                                                .cuda = K3_CUDA_IMPL(conv1d_silu_cuda),
                                                .bwd = causal_conv1d_silu_bwd});

}  // namespace k3
