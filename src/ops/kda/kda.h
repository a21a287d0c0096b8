// Kimi Delta Attention core (spec §3.6, §3.8), per head h, state S ∈ R^{K×V} (rows: key
// channel), fp32. For each token t, with α_t = exp(g_t) (per key channel):
//   S̄   = Diag(α_t) S
//   S   = S̄ + β_t k_t (v_t − S̄ᵀ k_t)ᵀ
//   o_t = Sᵀ q_t
// q and k arrive already L2-normalised (q also scaled); g is the log decay (g ≤ 0).
// Two implementations of the same maths:
//   kda_recurrent  token by token (decode; also the reference),
//   kda_chunked    chunkwise-parallel WY/UT form, chunk C (prefill; fp32 matrix products).
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

struct KdaShape {
  int64_t T = 0;  // tokens
  int64_t H = 0;  // heads
  int64_t K = 0;  // key dim
  int64_t V = 0;  // value dim
};

struct KdaInputs {
  const float* q;     // [T, H, K]
  const float* k;     // [T, H, K]
  const float* v;     // [T, H, V]
  const float* g;     // [T, H, K] log decay
  const float* beta;  // [T, H]
};

// S [H, K, V] in/out; o [T, H, V].
using KdaFn = void(const KdaInputs& in, KdaShape s, float* S, float* o);
using KdaRecurrentFn = KdaFn;
using KdaChunkedFn = KdaFn;
// Both have the double recurrence kda_recurrent_ref as their reference.
// Gradients of the KDA inputs (each [T, H, …] like its input; null skips one).
struct KdaGrads {
  float *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
};
// Backward of the recurrence (kda_bwd.cpp): S0 [H, K, V] is the state the forward started from
// (null = zeros); adds the input gradients given d_o [T, H, V] (the final state gets none).
using KdaBwdFn = void(const KdaInputs& in, KdaShape s, const float* S0, const float* d_o,
                      const KdaGrads& d);
extern const OpTable<KdaRecurrentFn, KdaBwdFn> kKdaRecurrentOp;  // "kda_recurrent"
void kda_recurrent_bwd(const KdaInputs& in, KdaShape s, const float* S0, const float* d_o,
                       const KdaGrads& d);
// Backward of the chunked form (kda_chunked_bwd.cpp; the same gradients, keeping one state per
// chunk instead of one per token); _64 is the registered one (C = 64, as the forward).
void kda_chunked_bwd(const KdaInputs& in, KdaShape s, const float* S0, const float* d_o,
                     const KdaGrads& d, int64_t chunk);
void kda_chunked_bwd_64(const KdaInputs& in, KdaShape s, const float* S0, const float* d_o,
                        const KdaGrads& d);
extern const OpTable<KdaChunkedFn, KdaBwdFn> kKdaChunkedOp;  // "kda_chunked": C = 64

// The chunked form over a varlen batch (the prompt chunks of one step): sequence i is token
// rows [t0, t0 + n) of the step's inputs [T, H, *] (n = 0: nothing, its state kept) and owns
// the state S [H, K, V] (in/out); its rows of o [T, H, V] are written, the others kept. s.T is
// unused. On the device one launch covers the batch (backend/cuda/kda_chunked.cu).
struct KdaBatchSeq {
  int64_t t0 = 0, n = 0;
  float* S = nullptr;
};
using KdaChunkedBatchFn = void(const KdaInputs& all, const KdaBatchSeq* seqs, int64_t n, KdaShape s,
                               float* o);
extern const OpTable<KdaChunkedBatchFn> kKdaChunkedBatchOp;  // "kda_chunked_batch"
void kda_chunked_batch(const KdaInputs& all, const KdaBatchSeq* seqs, int64_t n, KdaShape s,
                       float* o);
void kda_chunked_batch_ref(const KdaInputs& all, const KdaBatchSeq* seqs, int64_t n, KdaShape s,
                           float* o);

void kda_recurrent(const KdaInputs& in, KdaShape s, float* S, float* o);
// The fp32 matrix form (kda_chunked_f32.cpp; the registered one, C = 64).
void kda_chunked(const KdaInputs& in, KdaShape s, float* S, float* o, int64_t chunk = 64);
// The same with the chunk algebra in double, one pair of tokens at a time (kda_chunked.cpp): the
// first implementation, kept as a reference of the fp32 form.
void kda_chunked_f64(const KdaInputs& in, KdaShape s, float* S, float* o, int64_t chunk = 64);

// Plain double-precision reference of the recurrence (the oracle of both forms).
void kda_recurrent_ref(const KdaInputs& in, KdaShape s, float* S, float* o);

// One decode step of many single-token sequences: sequence i is token row t0 of the step's
// inputs [T, H, *] and owns the state S [H, K, V] (in/out). s.T is unused (s.H, s.K, s.V).
struct KdaDecodeSeq {
  int64_t t0 = 0;
  float* S = nullptr;
};
using KdaDecodeFn = void(const KdaInputs& all, const KdaDecodeSeq* seqs, int64_t n, KdaShape s,
                         float* o);
extern const OpTable<KdaDecodeFn> kKdaDecodeOp;  // "kda_decode": one loop over (sequence, head)

void kda_decode(const KdaInputs& all, const KdaDecodeSeq* seqs, int64_t n, KdaShape s, float* o);
void kda_decode_ref(const KdaInputs& all, const KdaDecodeSeq* seqs, int64_t n, KdaShape s,
                    float* o);

}  // namespace k3
