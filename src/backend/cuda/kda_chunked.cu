// KDA chunked prefill on the device: the chunkwise WY/UT algebra of ops/kda/kda_chunked_f32.cpp
// (see there for the equations) for a varlen batch of sequences. By default in two launches
// (kda_chunked_split.cuh: the state-free algebra of every chunk at once, then the state pass);
// the fused kernel below does both in one: one block per (sequence, head, 64 value columns)
// walks its sequence's chunks of kC = 64 tokens in order, its state tile S [K, 64] in shared
// memory (fp32). Per chunk of n tokens, Γ = cumsum g:
//   A_kk[r,s] = Σ_i k_r k_s e^{Γ_r−Γ_s} (s < r),  A_qk[r,s] = Σ_i q_r k_s e^{Γ_r−Γ_s} (s ≤ r)
//   Tinv = (I + Diag(β) A_kk)⁻¹, by 16×16 blocks (diagonal blocks by substitution)
//   R = β ⊙ V − (β ⊙ e^Γ ⊙ K) S;  Ṽ = Tinv R
//   O = (Q ⊙ e^Γ) S + A_qk Ṽ;  S ← Diag(e^{Γ_n}) S + (K ⊙ e^{Γ_n−Γ})ᵀ Ṽ
// The decays of A are factorised about the first token a0 of each 16-row sub-chunk for the
// earlier sub-chunks (both factors ≤ 1 when g ≤ 0: nothing overflows however strong the
// gates) and taken one exp per pair inside the diagonal sub-chunk blocks.
// The matrix products run on the tensor cores (mma.sync m16n8k8 tf32) with every operand split
// as tf32 hi + lo and hi·hi + hi·lo + lo·hi accumulated in fp32 (fp32-grade, ~2^-21 per
// product): the op is held to the fp32 recurrence's tolerance. In bf16 precision every operand
// is rounded to tf32 once and each product is one mma (~1e-3 relative: held to 4e-3).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "backend/cuda/graph.cuh"
#include "backend/cuda/launchers.h"
#include "backend/cuda/runtime.cuh"
#include "core/precision.h"

namespace k3 {
namespace {

using cuda::Args;
using cuda::check_launch;
using cuda::stream;

constexpr int kC = 64;    // tokens per chunk
constexpr int kKP = 128;  // key channels held (K ≤ kKP, the rest zero)
constexpr int kVT = 64;   // value columns per block
constexpr int kSub = 16;  // sub-chunk rows (decay factorisation, inverse blocks)
struct Seg {
  int64_t t0, n;  // token rows of the step
  float* S;       // [H, K, V]
};

// 16 warps a block (twice the warps of 8 hide the latency of the shared-memory operand loads;
// registers capped at 128).
constexpr int kThreads = 512;
#include "backend/cuda/kda_chunked_body.cuh"
#include "backend/cuda/kda_chunked_split.cuh"

// The fused kernel (one launch, no workspace) where a workspace cannot be had: inside a
// captured graph (only decode steps are captured today); K3_KDA_CHUNK_FUSED=1 picks it always
// (read at each call: tests and A/B runs switch it).
bool use_fused() {
  const char* e = std::getenv("K3_KDA_CHUNK_FUSED");
  return (e != nullptr && std::atoi(e) == 1) || cuda::graph_mode() != cuda::GraphMode::off;
}

}  // namespace

void kda_chunked_batch_cuda(const KdaInputs& all, const KdaBatchSeq* seqs, int64_t n, KdaShape s,
                            float* o) {
  if (n == 0 || s.H == 0) return;
  check(s.K >= 1 && s.V >= 1, "kda_chunked (cuda): K ", s.K, ", V ", s.V);
  if (s.K > kKP) {  // wider keys than the chunk kernel holds: the token-serial kernel
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = seqs[i].t0 * s.H;
      const KdaInputs in{all.q + r * s.K, all.k + r * s.K, all.v + r * s.V, all.g + r * s.K,
                         all.beta + r};
      kda_recurrent_cuda(in, {seqs[i].n, s.H, s.K, s.V}, seqs[i].S, o + r * s.V);
    }
    return;
  }
  Args a;
  int64_t T = 0;
  for (int64_t i = 0; i < n; ++i) {
    check(seqs[i].t0 >= 0 && seqs[i].n >= 0, "kda_chunked (cuda): sequence ", i, " rows");
    T = std::max(T, seqs[i].t0 + seqs[i].n);
  }
  const int64_t th = T * s.H;
  const KdaInputs d{a.in(all.q, th * s.K), a.in(all.k, th * s.K), a.in(all.v, th * s.V),
                    a.in(all.g, th * s.K), a.in(all.beta, th)};
  float* dout = a.inout(o, th * s.V);  // rows of other sequences are kept
  std::vector<Seg> segs;
  segs.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (seqs[i].n == 0) continue;  // an empty sequence keeps its state
    segs.push_back({seqs[i].t0, seqs[i].n, a.inout(seqs[i].S, s.H * s.K * s.V)});
  }
  if (segs.empty()) return;
  // bf16 precision: single tf32 products (~1e-3 relative), three times fewer of them.
  const bool tf32 = active_precision() == Precision::bf16;
  if (!use_fused()) {
    launch_split(a, d, segs, s, tf32, dout);
    return;
  }
  launch_chunks(d, a.host_array(segs.data(), segs.size()), static_cast<int64_t>(segs.size()), s,
                tf32, dout);
}

void kda_chunked_cuda(const KdaInputs& in, KdaShape s, float* S, float* o) {
  const KdaBatchSeq seq{0, s.T, S};
  kda_chunked_batch_cuda(in, &seq, 1, s, o);
}

}  // namespace k3
