// Chunkwise-parallel KDA (spec §3.8) in fp32 matrix form: the same algebra as kda_chunked.cpp
// (see there for the equations), with every O(C²K) / O(CKV) sum a product on the dispatched
// fp32 GEMM (core/gemm.h). Per head and chunk of n tokens, Γ = cumsum g (in double):
//   A_kk[r,s] = Σ_i k_r k_s e^{Γ_r−Γ_s} (s < r),  A_qk[r,s] = Σ_i q_r k_s e^{Γ_r−Γ_s} (s ≤ r)
//   Tinv = (I + Diag(β) A_kk)⁻¹                                    (forward substitution)
//   Ṽ = Tinv (β ⊙ V − (β ⊙ e^Γ ⊙ K) S)
//   O = (Q ⊙ e^Γ) S + A_qk Ṽ,   S ← Diag(e^{Γ_n}) S + (K ⊙ e^{Γ_n−Γ})ᵀ Ṽ
// The pairwise decays are factorised per sub-chunk of kSub rows about its first token a0:
//   e^{Γ_r−Γ_s} = e^{Γ_r−Γ_a0} · e^{Γ_a0−Γ_s},
// both factors ≤ 1 for the earlier sub-chunks (s < a0 ≤ r), so nothing overflows however
// strong the gates; within the sub-chunk the second factor is ≥ 1 and bounded by the
// sub-chunk's own decay spread, which must stay under kMaxSpread (else that diagonal block
// takes one exp per pair). Tolerance against the double recurrence: tests/ops/test_kda_conv.cpp.
#include <algorithm>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/fast_math.h"
#include "core/gemm.h"
#include "core/parallel.h"
#include "ops/kda/kda.h"

namespace k3 {
namespace {

constexpr int64_t kSub = 16;
// e^{±80} is a normal float and inside exp_fast's unclamped range ([-87, 88]).
constexpr double kMaxSpread = 80.0;

// One per thread, kept between calls (grows only) so steady-state steps allocate nothing.
struct Scratch {
  std::vector<double> G;             // [n, K] Γ
  std::vector<float> qg, kb, ke;     // [n, K]: q ⊙ e^Γ, −β k ⊙ e^Γ, k ⊙ e^{Γ_n−Γ}
  std::vector<float> lq, lk;         // [kSub, K]: left factors of one sub-chunk
  std::vector<float> rt;             // [K, n]: right factors, transposed (a GEMM's B)
  std::vector<float> akk, aqk, inv;  // [n, n]
  std::vector<float> r, vn;          // [n, V]: β V − W S, then Ṽ
  std::vector<float> x;              // [K]
  void ensure(int64_t C, int64_t K, int64_t V) {
    auto grow = [](auto& v, int64_t n) {
      if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    };
    grow(G, C * K);
    for (auto* v : {&qg, &kb, &ke, &rt}) grow(*v, C * K);
    for (auto* v : {&lq, &lk}) grow(*v, kSub * K);
    for (auto* v : {&akk, &aqk, &inv}) grow(*v, C * C);
    for (auto* v : {&r, &vn}) grow(*v, C * V);
    grow(x, K);
  }
};

// Row t of head h of a [T, H, D] tensor.
inline const float* row(const float* base, int64_t t, int64_t h, int64_t H, int64_t D) {
  return base + (t * H + h) * D;
}

// x[i] = e^{a[i] − b[i]} (the difference in double, the exp in float).
void exp_diff(const double* a, const double* b, int64_t K, float* x) {
  for (int64_t i = 0; i < K; ++i) x[i] = static_cast<float>(a[i] - b[i]);
  for (int64_t i = 0; i < K; ++i) x[i] = exp_fast(x[i]);
}

struct ChunkView {
  const KdaInputs& in;
  int64_t H, K, V, h, t0, n;
  const float* q(int64_t r) const { return row(in.q, t0 + r, h, H, K); }
  const float* k(int64_t r) const { return row(in.k, t0 + r, h, H, K); }
  const float* v(int64_t r) const { return row(in.v, t0 + r, h, H, V); }
  const float* g(int64_t r) const { return row(in.g, t0 + r, h, H, K); }
  float beta(int64_t r) const { return in.beta[(t0 + r) * H + h]; }
};

// The diagonal block [a0, a1)² of A_kk / A_qk, one exp per pair (gates too strong to factor).
void diagonal_pairs(const ChunkView& c, Scratch& w, int64_t a0, int64_t a1) {
  const int64_t K = c.K, n = c.n;
  for (int64_t r = a0; r < a1; ++r) {
    for (int64_t s = a0; s <= r; ++s) {
      exp_diff(&w.G[r * K], &w.G[s * K], K, w.x.data());
      const float *kr = c.k(r), *qr = c.q(r), *ks = c.k(s);
      float kk = 0, qk = 0;
      for (int64_t i = 0; i < K; ++i) {
        kk += kr[i] * ks[i] * w.x[i];
        qk += qr[i] * ks[i] * w.x[i];
      }
      w.akk[r * n + s] = kk;
      w.aqk[r * n + s] = qk;
    }
  }
}

// Rows [a0, a1) of A_kk and A_qk, columns [0, a1) (the upper triangle left as garbage).
void decay_products(const ChunkView& c, Scratch& w, int64_t a0, int64_t a1) {
  const int64_t K = c.K, n = c.n, m = a1 - a0;
  double spread = 0;
  for (int64_t i = 0; i < K; ++i)
    spread = std::max(spread, w.G[a0 * K + i] - w.G[(a1 - 1) * K + i]);
  const int64_t cols = spread <= kMaxSpread ? a1 : a0;  // columns the factorised product covers
  for (int64_t s = 0; s < cols; ++s) {  // rt[i, s] = k_s[i] e^{Γ_a0[i] − Γ_s[i]}
    exp_diff(&w.G[a0 * K], &w.G[s * K], K, w.x.data());
    const float* ks = c.k(s);
    for (int64_t i = 0; i < K; ++i) w.rt[i * n + s] = ks[i] * w.x[i];
  }
  for (int64_t r = a0; r < a1; ++r) {  // left factors e^{Γ_r − Γ_a0} ⊙ (k_r, q_r)
    exp_diff(&w.G[r * K], &w.G[a0 * K], K, w.x.data());
    const float *kr = c.k(r), *qr = c.q(r);
    float *lk = &w.lk[(r - a0) * K], *lq = &w.lq[(r - a0) * K];
    for (int64_t i = 0; i < K; ++i) {
      lk[i] = kr[i] * w.x[i];
      lq[i] = qr[i] * w.x[i];
    }
  }
  std::fill_n(&w.akk[a0 * n], m * n, 0.0f);
  std::fill_n(&w.aqk[a0 * n], m * n, 0.0f);
  gemm_acc(m, cols, K, {w.lk.data(), K, 1}, w.rt.data(), n, &w.akk[a0 * n], n);
  gemm_acc(m, cols, K, {w.lq.data(), K, 1}, w.rt.data(), n, &w.aqk[a0 * n], n);
  if (cols == a0) diagonal_pairs(c, w, a0, a1);
}

// inv = (I + M)⁻¹ with M = Diag(β) A_kk strictly lower (row r: e_r − Σ_{s<r} M_rs inv_s).
void invert_unit_lower(const ChunkView& c, Scratch& w) {
  const int64_t n = c.n;
  for (int64_t r = 0; r < n; ++r) {
    float* tr = &w.inv[r * n];
    std::fill_n(tr, n, 0.0f);
    tr[r] = 1.0f;
    const float br = c.beta(r);
    for (int64_t s = 0; s < r; ++s) {
      const float m = br * w.akk[r * n + s];
      const float* ts = &w.inv[s * n];
      for (int64_t j = 0; j <= s; ++j) tr[j] -= m * ts[j];
    }
  }
}

void chunk_step(const ChunkView& c, float* S, float* o, Scratch& w) {
  const int64_t K = c.K, V = c.V, n = c.n, ldo = c.H * c.V;
  for (int64_t r = 0; r < n; ++r) {  // Γ [n, K]
    const float* g = c.g(r);
    for (int64_t i = 0; i < K; ++i) w.G[r * K + i] = (r ? w.G[(r - 1) * K + i] : 0.0) + g[i];
  }
  for (int64_t a0 = 0; a0 < n; a0 += kSub) decay_products(c, w, a0, std::min(n, a0 + kSub));
  for (int64_t r = 0; r < n; ++r) {  // A_qk keeps s ≤ r
    std::fill(&w.aqk[r * n + r + 1], &w.aqk[(r + 1) * n], 0.0f);
  }
  invert_unit_lower(c, w);
  const double* Gn = &w.G[(n - 1) * K];
  for (int64_t r = 0; r < n; ++r) {
    const float *qr = c.q(r), *kr = c.k(r), *vr = c.v(r);
    const float br = c.beta(r);
    for (int64_t i = 0; i < K; ++i) w.x[i] = exp_fast(static_cast<float>(w.G[r * K + i]));
    for (int64_t i = 0; i < K; ++i) {
      w.qg[r * K + i] = qr[i] * w.x[i];
      w.kb[r * K + i] = -br * kr[i] * w.x[i];
    }
    exp_diff(Gn, &w.G[r * K], K, w.x.data());
    for (int64_t i = 0; i < K; ++i) w.ke[r * K + i] = kr[i] * w.x[i];
    for (int64_t j = 0; j < V; ++j) w.r[r * V + j] = br * vr[j];
  }
  // R = β V − (β e^Γ K) S;  Ṽ = inv R (block lower triangular: sub-chunk rows use a1 columns).
  gemm_acc(n, V, K, {w.kb.data(), K, 1}, S, V, w.r.data(), V);
  std::fill_n(w.vn.data(), n * V, 0.0f);
  for (int64_t a0 = 0; a0 < n; a0 += kSub) {
    const int64_t a1 = std::min(n, a0 + kSub);
    gemm_acc(a1 - a0, V, a1, {&w.inv[a0 * n], n, 1}, w.r.data(), V, &w.vn[a0 * V], V);
  }
  // O = (Q e^Γ) S + A_qk Ṽ, written into the chunk's rows of o [T, H, V].
  float* oc = o + (c.t0 * c.H + c.h) * V;
  for (int64_t r = 0; r < n; ++r) std::fill_n(oc + r * ldo, V, 0.0f);
  gemm_acc(n, V, K, {w.qg.data(), K, 1}, S, V, oc, ldo);
  for (int64_t a0 = 0; a0 < n; a0 += kSub) {
    const int64_t a1 = std::min(n, a0 + kSub);
    gemm_acc(a1 - a0, V, a1, {&w.aqk[a0 * n], n, 1}, w.vn.data(), V, oc + a0 * ldo, ldo);
  }
  // S ← Diag(e^{Γ_n}) S + (K e^{Γ_n−Γ})ᵀ Ṽ.
  for (int64_t i = 0; i < K; ++i) w.x[i] = exp_fast(static_cast<float>(Gn[i]));
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < V; ++j) S[i * V + j] *= w.x[i];
  }
  gemm_acc(K, V, n, {w.ke.data(), 1, K}, w.vn.data(), V, S, V);
}

}  // namespace

void kda_chunked(const KdaInputs& in, KdaShape s, float* S, float* o, int64_t chunk) {
  parallel_for(s.H, true, [&](int64_t h) {
    thread_local Scratch w;
    w.ensure(chunk, s.K, s.V);
    float* Sh = S + h * s.K * s.V;
    for (int64_t t0 = 0; t0 < s.T; t0 += chunk) {
      const ChunkView c{in, s.H, s.K, s.V, h, t0, std::min(chunk, s.T - t0)};
      chunk_step(c, Sh, o, w);
    }
  });
}

namespace {
// The registered launcher: the prefill chunk size.
void kda_chunked_64(const KdaInputs& in, KdaShape s, float* S, float* o) {
  kda_chunked(in, s, S, o, 64);
}
}  // namespace

const OpTable<KdaChunkedFn, KdaBwdFn> kKdaChunkedOp =
    register_op<KdaChunkedFn, KdaBwdFn>({.name = "kda_chunked",
                                         .ref = kda_recurrent_ref,
                                         .cpu = kda_chunked_64,
                                         .cuda = K3_CUDA_IMPL(kda_chunked_cuda),
                                         .bwd = kda_chunked_bwd_64});

namespace {
// Sequence i's inputs from its first row on, and fn over its rows.
template <typename Fn>
void each_seq(const KdaInputs& all, const KdaBatchSeq* seqs, int64_t n, KdaShape s, float* o,
              Fn&& fn) {
  for (int64_t i = 0; i < n; ++i) {
    if (seqs[i].n == 0) continue;
    const int64_t r = seqs[i].t0 * s.H;
    const KdaInputs in{all.q + r * s.K, all.k + r * s.K, all.v + r * s.V, all.g + r * s.K,
                       all.beta + r};
    fn(in, KdaShape{seqs[i].n, s.H, s.K, s.V}, seqs[i].S, o + r * s.V);
  }
}
}  // namespace

void kda_chunked_batch(const KdaInputs& all, const KdaBatchSeq* seqs, int64_t n, KdaShape s,
                       float* o) {
  each_seq(all, seqs, n, s, o, kda_chunked_64);
}

void kda_chunked_batch_ref(const KdaInputs& all, const KdaBatchSeq* seqs, int64_t n, KdaShape s,
                           float* o) {
  each_seq(all, seqs, n, s, o, kda_recurrent_ref);
}

const OpTable<KdaChunkedBatchFn> kKdaChunkedBatchOp =
    register_op<KdaChunkedBatchFn>({.name = "kda_chunked_batch",
                                    .ref = kda_chunked_batch_ref,
                                    .cpu = kda_chunked_batch,
                                    .cuda = K3_CUDA_IMPL(kda_chunked_batch_cuda)});

}  // namespace k3
