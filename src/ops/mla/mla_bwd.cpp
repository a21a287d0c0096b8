// Backward of the expanded (causal softmax) attention, per head h and query t over the keys
// τ ≤ n_past + t, with p = softmax(scale · q·k_τ) and o = Σ p_τ v_τ:
//   dp_τ = do·v_τ,  ds_τ = p_τ (dp_τ − Σ p dp),  dq += scale Σ ds_τ k_τ,
//   dk_τ += scale · ds_τ q,  dv_τ += p_τ do.
// Per head as five fp32 products on the dispatched GEMM (core/gemm.h) over the full [T, S]
// score matrix, the causal mask applied by zeroing p (so ds is zero there too).
#include <algorithm>
#include <cmath>

#include "core/fast_math.h"
#include "core/gemm.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/mla/mla.h"

namespace k3 {
namespace {

// out[cols, rows] = the [rows, cols] matrix at in with row stride ld.
void transpose_strided(const float* in, int64_t rows, int64_t cols, int64_t ld, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * ld + c];
}

// Row t of the scores P [T, S] into softmax probabilities over τ < n (zero beyond).
void softmax_row(float* p, int64_t n, int64_t S, float scale) {
  float mx = -INFINITY;
  for (int64_t tau = 0; tau < n; ++tau) mx = std::max(mx, p[tau] * scale);
  double sum = 0;
  for (int64_t tau = 0; tau < n; ++tau) {
    p[tau] = exp_fast(p[tau] * scale - mx);
    sum += p[tau];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t tau = 0; tau < n; ++tau) p[tau] *= inv;
  std::fill(p + n, p + S, 0.0f);
}

}  // namespace

void mla_attention_expanded_bwd(const float* q, const float* k, const float* v, MlaShape s,
                                const float* d_o, float* dq, float* dk, float* dv) {
  const int64_t T = s.T, H = s.H, Dq = s.Dn + s.Dr, Dv = s.Dv, S = s.n_past + s.T;
  if (T <= 0 || H <= 0) return;
  const float scale = static_cast<float>(1.0 / std::sqrt(double(Dq)));
  const size_t ts = static_cast<size_t>(T * S);
  // Heads write disjoint column slices of dq/dk/dv.
  parallel_for(H, T * S * Dq > 8192, [&](int64_t h) {
    const float *qh = q + h * Dq, *kh = k + h * Dq, *vh = v + h * Dv, *doh = d_o + h * Dv;
    float* P = thread_scratch<float, struct MlaBwdP>(ts);    // [T, S]
    float* dP = thread_scratch<float, struct MlaBwdDp>(ts);  // [T, S], then ds
    float* kt = thread_scratch<float, struct MlaBwdKt>(static_cast<size_t>(std::max(Dq, Dv) * S));
    std::fill(P, P + ts, 0.0f);
    std::fill(dP, dP + ts, 0.0f);
    transpose_strided(kh, S, Dq, H * Dq, kt);          // kᵀ [Dq, S]
    gemm_acc(T, S, Dq, {qh, H * Dq, 1}, kt, S, P, S);  // q kᵀ [T, S]
    for (int64_t t = 0; t < T; ++t) softmax_row(P + t * S, s.n_past + t + 1, S, scale);
    transpose_strided(vh, S, Dv, H * Dv, kt);            // vᵀ [Dv, S]
    gemm_acc(T, S, Dv, {doh, H * Dv, 1}, kt, S, dP, S);  // do vᵀ [T, S]
    for (int64_t t = 0; t < T; ++t) {                    // ds = scale · p (dp − Σ p dp)
      float *p = P + t * S, *d = dP + t * S;
      double pdp = 0;
      for (int64_t tau = 0; tau < S; ++tau) pdp += double(p[tau]) * d[tau];
      const float c = static_cast<float>(pdp);
      for (int64_t tau = 0; tau < S; ++tau) d[tau] = scale * p[tau] * (d[tau] - c);
    }
    if (dq != nullptr) gemm_acc(T, Dq, S, {dP, S, 1}, kh, H * Dq, dq + h * Dq, H * Dq);
    if (dk != nullptr) gemm_acc(S, Dq, T, {dP, 1, S}, qh, H * Dq, dk + h * Dq, H * Dq);
    if (dv != nullptr) gemm_acc(S, Dv, T, {P, 1, S}, doh, H * Dv, dv + h * Dv, H * Dv);
  });
}

}  // namespace k3
