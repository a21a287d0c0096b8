#include "ops/conv1d/conv1d.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/fast_math.h"
#include "core/parallel.h"
#include "core/scratch.h"

namespace k3 {
namespace {
template <typename F>
F silu(F v) {
  return v / (F(1) + std::exp(-v));
}
}  // namespace

// Blocks of kChannels channels, token by token: each tap is one pass over the block's
// contiguous channels (vectorised), in the order of the single-channel sum
// w[W-1]·x_t + Σ_{j<W-1} w[j]·x_{t-(W-1)+j}.
constexpr int64_t kChannels = 64;

namespace {

// Channel block b of one sequence's T rows (x, y at its first row; row stride C).
void conv_block(const float* x, const float* w, float* state, int64_t T, int64_t C, int64_t W,
                int64_t b, float* y) {
  const int64_t H = W - 1;  // history length
  const int64_t c0 = b * kChannels, nc = std::min(kChannels, C - c0);
  float* wt = thread_scratch<float, struct ConvTapsTag>(W * kChannels);  // [W, nc] taps
  float* hb = thread_scratch<float, struct ConvHistTag>(H * kChannels);  // [H, nc] history
  float* acc = thread_scratch<float, struct ConvAccTag>(kChannels);      // [nc]
  for (int64_t c = 0; c < nc; ++c) {
    for (int64_t j = 0; j < W; ++j) wt[j * nc + c] = w[(c0 + c) * W + j];
    for (int64_t j = 0; j < H; ++j) hb[j * nc + c] = state[(c0 + c) * H + j];
  }
  // Input row τ of the block (τ < 0: the history before this call).
  auto in = [&](int64_t tau) { return tau < 0 ? hb + (H + tau) * nc : x + tau * C + c0; };
  for (int64_t t = 0; t < T; ++t) {
    const float* cur = x + t * C + c0;
    for (int64_t c = 0; c < nc; ++c) acc[c] = wt[H * nc + c] * cur[c];
    for (int64_t j = 0; j < H; ++j) {
      const float* xj = in(t - H + j);
      const float* wj = wt + j * nc;
      for (int64_t c = 0; c < nc; ++c) acc[c] += wj[c] * xj[c];
    }
    float* yt = y + t * C + c0;
    for (int64_t c = 0; c < nc; ++c) yt[c] = acc[c] / (1.0f + exp_fast(-acc[c]));  // SiLU
  }
  for (int64_t j = 0; j < H; ++j) {  // the last H inputs become the history
    const float* src = in(T - H + j);
    for (int64_t c = 0; c < nc; ++c) state[(c0 + c) * H + j] = src[c];
  }
}

}  // namespace

void causal_conv1d_silu(const float* x, const float* w, float* state, Conv1dShape s, float* y) {
  const int64_t blocks = (s.C + kChannels - 1) / kChannels;
  parallel_for(blocks, s.C * s.T > 4096,
               [&](int64_t b) { conv_block(x, w, state, s.T, s.C, s.W, b, y); });
}

void causal_conv1d_silu_batch(const float* x, const float* w, const Conv1dSeq* seqs, int64_t n_seqs,
                              Conv1dShape s, float* y) {
  const int64_t blocks = (s.C + kChannels - 1) / kChannels;
  int64_t rows = 0;
  for (int64_t i = 0; i < n_seqs; ++i) rows += seqs[i].n;
  // One loop over (sequence, channel block): a decode step pays one fork/join, not one a row.
  parallel_for(n_seqs * blocks, s.C * rows > 4096, [&](int64_t it) {
    const Conv1dSeq& q = seqs[it / blocks];
    if (q.n == 0) return;
    conv_block(x + q.t0 * s.C, w, q.state, q.n, s.C, s.W, it % blocks, y + q.t0 * s.C);
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

void causal_conv1d_silu_batch_ref(const float* x, const float* w, const Conv1dSeq* seqs,
                                  int64_t n_seqs, Conv1dShape s, float* y) {
  for (int64_t i = 0; i < n_seqs; ++i) {
    const Conv1dSeq& q = seqs[i];
    if (q.n == 0) continue;
    causal_conv1d_silu_ref(x + q.t0 * s.C, w, q.state, {q.n, s.C, s.W}, y + q.t0 * s.C);
  }
}

const OpTable<Conv1dSiluBatchFn> kConv1dSiluBatchOp =
    register_op<Conv1dSiluBatchFn>({.name = "conv1d_silu_batch",
                                    .ref = causal_conv1d_silu_batch_ref,
                                    .cpu = causal_conv1d_silu_batch,
                                    .cuda = K3_CUDA_IMPL(conv1d_silu_batch_cuda)});

const OpTable<Conv1dSiluFn, Conv1dSiluBwdFn> kConv1dSiluOp =
    register_op<Conv1dSiluFn, Conv1dSiluBwdFn>({.name = "conv1d_silu",
                                                .ref = causal_conv1d_silu_ref,
                                                .cpu = causal_conv1d_silu,
                                                .cuda = K3_CUDA_IMPL(conv1d_silu_cuda),
                                                .bwd = causal_conv1d_silu_bwd});

}  // namespace k3
