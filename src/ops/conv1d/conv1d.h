// Depthwise causal short convolution + SiLU (KDA q/k/v, spec §3.3):
//   y[t, c] = SiLU( Σ_{j<W} w[c, j] · x[t - (W-1) + j, c] )
// Tap W-1 multiplies the current token. `state` [C, W-1] holds the previous W-1 inputs per
// channel (oldest first; zeros at sequence start) and is updated, so a sequence processed in
// pieces gives the same output as in one call.
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

struct Conv1dShape {
  int64_t T = 0;  // tokens
  int64_t C = 0;  // channels
  int64_t W = 4;  // kernel width
};

// x [T, C], w [C, W], state [C, W-1] (in/out), y [T, C] (may not alias x).
using Conv1dSiluFn = void(const float* x, const float* w, float* state, Conv1dShape s, float* y);
// Backward: `state` is the history as the forward found it ([C, W-1]; null = zeros, a
// sequence start); adds dx [T, C] and dw [C, W] given dy [T, C] (the history gets none).
using Conv1dSiluBwdFn = void(const float* x, const float* w, const float* state, Conv1dShape s,
                             const float* dy, float* dx, float* dw);
extern const OpTable<Conv1dSiluFn, Conv1dSiluBwdFn> kConv1dSiluOp;  // "conv1d_silu"
void causal_conv1d_silu_bwd(const float* x, const float* w, const float* state, Conv1dShape s,
                            const float* dy, float* dx, float* dw);

void causal_conv1d_silu(const float* x, const float* w, float* state, Conv1dShape s, float* y);

// The same over a step's varlen batch: sequence i owns rows t0 … t0+n-1 of x [T, C] and y
// [T, C] and its history state [C, W-1] (in/out); n = 0 leaves its state alone, and rows of y
// outside every sequence are kept. s.T is the step's row count. One parallel loop (one launch
// on the device) for all sequences: a decode step of 64 sequences made 64 calls per projection.
struct Conv1dSeq {
  int64_t t0 = 0, n = 0;
  float* state = nullptr;  // [C, W-1]
};
using Conv1dSiluBatchFn = void(const float* x, const float* w, const Conv1dSeq* seqs,
                               int64_t n_seqs, Conv1dShape s, float* y);
extern const OpTable<Conv1dSiluBatchFn> kConv1dSiluBatchOp;  // "conv1d_silu_batch"
void causal_conv1d_silu_batch(const float* x, const float* w, const Conv1dSeq* seqs, int64_t n_seqs,
                              Conv1dShape s, float* y);
// Reference: the one-sequence reference on each sequence's rows.
void causal_conv1d_silu_batch_ref(const float* x, const float* w, const Conv1dSeq* seqs,
                                  int64_t n_seqs, Conv1dShape s, float* y);

// Reference: the same sum written over an explicit zero-padded history, in double.
void causal_conv1d_silu_ref(const float* x, const float* w, float* state, Conv1dShape s, float* y);

}  // namespace k3
