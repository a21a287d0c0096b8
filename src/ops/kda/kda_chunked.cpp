// Chunkwise-parallel KDA (spec §3.8), the chunk algebra in double: the first implementation, kept
// as the reference of the fp32 matrix form (kda_chunked_f32.cpp) and its tests. Within a chunk of n
// ≤ C tokens, with Γ_r = Σ_{s≤r} g_s:
//   M[r,s] = β_r Σ_i k_r[i] k_s[i] e^{Γ_r[i]−Γ_s[i]}            (s < r)
//   W = (I+M)⁻¹ (β ⊙ e^Γ ⊙ K),  U = (I+M)⁻¹ (β ⊙ V)             (forward substitution)
//   Ṽ = U − W S                                                  (new values)
//   o_r = (q_r ⊙ e^{Γ_r})ᵀ S + Σ_{s≤r} [Σ_i q_r[i] k_s[i] e^{Γ_r[i]−Γ_s[i]}] Ṽ_s
//   S ← Diag(e^{Γ_n}) S + Σ_s (e^{Γ_n−Γ_s} ⊙ k_s) Ṽ_sᵀ
// Decays are formed pairwise as e^{Γ_r−Γ_s} ∈ (0, 1] so nothing overflows however long the
// chunk's cumulative decay is.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "ops/kda/kda.h"

namespace k3 {
namespace {

// The chunk's internal algebra runs in double: it costs O(C²K) per chunk and head, small next
// to the O(d·P) projections, and the forward substitution through (I+M) otherwise adds
// visible fp32 noise on long, mildly decaying chunks.
using Acc = double;

// One per thread, kept between calls (grows only) so steady-state steps allocate nothing.
struct ChunkScratch {
  std::vector<Acc> gamma, decay, M, W, U, Vn, qs;
  void ensure(int64_t C, int64_t K, int64_t V) {
    auto grow = [](std::vector<Acc>& v, int64_t n) {
      if (static_cast<int64_t>(v.size()) < n) v.resize(n);
    };
    grow(gamma, C * K);
    grow(decay, C * C * K);
    grow(M, std::max(C * C, V));
    grow(W, C * K);
    grow(U, C * V);
    grow(Vn, C * V);
    grow(qs, V);
  }
};

// Gathers row t of head h from a [T, H, D] tensor.
inline const float* row(const float* base, int64_t t, int64_t h, int64_t H, int64_t D) {
  return base + (t * H + h) * D;
}

void chunk_step(const KdaInputs& in, KdaShape s, int64_t h, int64_t t0, int64_t n, float* S,
                float* o, ChunkScratch& w) {
  const int64_t H = s.H, K = s.K, V = s.V;
  // Γ [n, K]: cumulative log decay; decay[r][s][i] = e^{Γ_r[i]−Γ_s[i]} for s ≤ r.
  for (int64_t r = 0; r < n; ++r) {
    const float* g = row(in.g, t0 + r, h, H, K);
    for (int64_t i = 0; i < K; ++i)
      w.gamma[r * K + i] = (r ? w.gamma[(r - 1) * K + i] : 0.0) + g[i];
  }
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c <= r; ++c) {
      Acc* d = &w.decay[(r * n + c) * K];
      for (int64_t i = 0; i < K; ++i) d[i] = std::exp(w.gamma[r * K + i] - w.gamma[c * K + i]);
    }
  }
  // W and U by forward substitution through (I + M).
  for (int64_t r = 0; r < n; ++r) {
    const float* kr = row(in.k, t0 + r, h, H, K);
    const float* vr = row(in.v, t0 + r, h, H, V);
    const float br = in.beta[(t0 + r) * H + h];
    Acc* Wr = &w.W[r * K];
    Acc* Ur = &w.U[r * V];
    for (int64_t i = 0; i < K; ++i) Wr[i] = br * std::exp(w.gamma[r * K + i]) * kr[i];
    for (int64_t j = 0; j < V; ++j) Ur[j] = br * vr[j];
    for (int64_t c = 0; c < r; ++c) {
      const float* kc = row(in.k, t0 + c, h, H, K);
      const Acc* d = &w.decay[(r * n + c) * K];
      Acc m = 0;
      for (int64_t i = 0; i < K; ++i) m += kr[i] * kc[i] * d[i];
      m *= br;
      for (int64_t i = 0; i < K; ++i) Wr[i] -= m * w.W[c * K + i];
      for (int64_t j = 0; j < V; ++j) Ur[j] -= m * w.U[c * V + j];
    }
  }
  // Ṽ = U − W S, and the inter-chunk part of the output.
  for (int64_t r = 0; r < n; ++r) {
    Acc* vn = &w.Vn[r * V];
    Acc* acc = &w.qs[0];  // this row's output, accumulated in double
    const float* qr = row(in.q, t0 + r, h, H, K);
    for (int64_t j = 0; j < V; ++j) {
      vn[j] = w.U[r * V + j];
      acc[j] = 0;
    }
    for (int64_t i = 0; i < K; ++i) {
      const Acc wi = w.W[r * K + i];
      const Acc qi = qr[i] * std::exp(w.gamma[r * K + i]);
      const float* Si = S + i * V;
      for (int64_t j = 0; j < V; ++j) {
        vn[j] -= wi * Si[j];
        acc[j] += qi * Si[j];
      }
    }
    // Intra-chunk part: Σ_{s≤r} [Σ_i q_r[i] k_s[i] e^{Γ_r[i]−Γ_s[i]}] Ṽ_s.
    for (int64_t c = 0; c <= r; ++c) {
      const float* kc = row(in.k, t0 + c, h, H, K);
      const Acc* d = &w.decay[(r * n + c) * K];
      Acc a = 0;
      for (int64_t i = 0; i < K; ++i) a += qr[i] * kc[i] * d[i];
      const Acc* vc = c == r ? vn : &w.Vn[c * V];
      for (int64_t j = 0; j < V; ++j) acc[j] += a * vc[j];
    }
    float* orow = o + ((t0 + r) * H + h) * V;
    for (int64_t j = 0; j < V; ++j) orow[j] = static_cast<float>(acc[j]);
  }
  // State update to the end of the chunk.
  const Acc* gl = &w.gamma[(n - 1) * K];
  std::vector<Acc>& Si = w.M;  // one state row, in double while it is updated
  for (int64_t i = 0; i < K; ++i) {
    const Acc a = std::exp(gl[i]);
    for (int64_t j = 0; j < V; ++j) Si[j] = a * S[i * V + j];
    for (int64_t c = 0; c < n; ++c) {
      const Acc kd = row(in.k, t0 + c, h, H, K)[i] * w.decay[((n - 1) * n + c) * K + i];
      const Acc* vn = &w.Vn[c * V];
      for (int64_t j = 0; j < V; ++j) Si[j] += kd * vn[j];
    }
    for (int64_t j = 0; j < V; ++j) S[i * V + j] = static_cast<float>(Si[j]);
  }
}

}  // namespace

void kda_chunked_f64(const KdaInputs& in, KdaShape s, float* S, float* o, int64_t chunk) {
  parallel_for(s.H, true, [&](int64_t h) {
    thread_local ChunkScratch w;
    w.ensure(chunk, s.K, s.V);
    float* Sh = S + h * s.K * s.V;
    for (int64_t t0 = 0; t0 < s.T; t0 += chunk) {
      chunk_step(in, s, h, t0, std::min(chunk, s.T - t0), Sh, o, w);
    }
  });
}

}  // namespace k3
