// Backward of the chunkwise (WY/UT) KDA form, per head, chunk by chunk in reverse. Within a
// chunk of n tokens (state S at its start, Γ = cumsum g, D_rs = e^{Γ_r − Γ_s} per channel):
//   KK_rs = Σ_i k_r k_s D_rs (s < r),  M = Diag(β) KK,  Inv = (I + M)⁻¹,  Tm = Inv Diag(β),
//   W = Tm (e^Γ ⊙ k),  U = Tm v,  Ṽ = U − W S,  QK_rs = Σ_i q_r k_s D_rs (s ≤ r),
//   o = (e^Γ ⊙ q) S + QK Ṽ,  S' = Diag(e^{Γ_n}) S + (e^{Γ_n − Γ} ⊙ k)ᵀ Ṽ.
// Given do and dS' (the next chunk's dS; zero after the last), reverse mode gives
//   dṼ = QKᵀ do + (e^{Γ_n−Γ} ⊙ k) dS'ᵀ…,  dS = (e^Γ ⊙ q)ᵀ do + Diag(e^{Γ_n}) dS' − Wᵀ dṼ,
//   dTm = −dṼ Sᵀ (e^Γ ⊙ k)ᵀ + dṼ vᵀ,  dInv = dTm Diag(β),  dM = −Invᵀ dInv Invᵀ (s < r),
// then through KK, QK and the decays into dq, dk, dΓ, and dg = reverse cumsum of dΓ.
// A forward pass over the chunks keeps each chunk's start state and intermediates
// (O(n² + n·(K+V)) per chunk) for the walk back.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/kda/kda.h"
#include "ops/kda/kda_chunked_train.h"

namespace k3 {
namespace {

struct Mat2 {  // a small dense row-major matrix in double
  int64_t rows = 0, cols = 0;
  std::vector<double> a;
  Mat2(int64_t r, int64_t c) : rows(r), cols(c), a(static_cast<size_t>(r * c), 0.0) {}
  double& operator()(int64_t i, int64_t j) { return a[i * cols + j]; }
  double operator()(int64_t i, int64_t j) const { return a[i * cols + j]; }
};

// Decays e^{Γ_r − Γ_s} are formed as e^{Γ_r} · e^{−Γ_s} (two exps per token instead of one
// per token pair) on channels whose |Γ| stays under kSplitMax over the chunk, where neither
// factor over- or underflows a double; other channels take the pairwise exp.
constexpr double kSplitMax = 600.0;

// The chunk's inputs for one head, widened, and its forward intermediates.
struct Chunk {
  int64_t n, K, V;
  Mat2 q, k, v, gam, ed, eneg;  // [n, K] (v: [n, V]); Γ; e^Γ; e^{−Γ} (split channels)
  Mat2 E;  // [n, K]: e^{Γ_n − Γ_r}, the decay from token r to the chunk end
  std::vector<double> en, beta;  // e^{Γ_n} [K]; β [n]
  std::vector<char> split;       // [K]: the channel's decays are products of the two factors
  bool all_split = true;
  Mat2 KK, QK, Inv, Tm, W, U, Vn;

  Chunk(const KdaInputs& in, KdaShape s, int64_t h, int64_t t0, int64_t n_)
      : n(n_),
        K(s.K),
        V(s.V),
        q(n, K),
        k(n, K),
        v(n, V),
        gam(n, K),
        ed(n, K),
        eneg(n, K),
        E(n, K),
        en(static_cast<size_t>(K)),
        beta(static_cast<size_t>(n)),
        split(static_cast<size_t>(K), 1),
        KK(n, n),
        QK(n, n),
        Inv(n, n),
        Tm(n, n),
        W(n, K),
        U(n, V),
        Vn(n, V) {
    for (int64_t r = 0; r < n; ++r) {
      const int64_t row = (t0 + r) * s.H + h;
      for (int64_t i = 0; i < K; ++i) {
        q(r, i) = in.q[row * K + i];
        k(r, i) = in.k[row * K + i];
        gam(r, i) = (r ? gam(r - 1, i) : 0.0) + in.g[row * K + i];
        ed(r, i) = std::exp(gam(r, i));
        if (!(std::fabs(gam(r, i)) <= kSplitMax)) split[i] = 0;
      }
      for (int64_t j = 0; j < V; ++j) v(r, j) = in.v[row * V + j];
      beta[r] = in.beta[(t0 + r) * s.H + h];
    }
    for (int64_t i = 0; i < K; ++i) {
      en[i] = ed(n - 1, i);
      all_split = all_split && split[i];
    }
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < K; ++i) {
        if (split[i]) {
          eneg(r, i) = std::exp(-gam(r, i));
          E(r, i) = en[i] * eneg(r, i);
        } else {
          E(r, i) = std::exp(gam(n - 1, i) - gam(r, i));
        }
      }
    }
    std::vector<double> D(static_cast<size_t>(K));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c <= r; ++c) {
        decay_row(r, c, D.data());
        double kk = 0, qk = 0;
        for (int64_t i = 0; i < K; ++i) {
          kk += k(r, i) * k(c, i) * D[i];
          qk += q(r, i) * k(c, i) * D[i];
        }
        KK(r, c) = c < r ? kk : 0.0;
        QK(r, c) = qk;
      }
    }
    for (int64_t r = 0; r < n; ++r) {  // Inv = (I + M)⁻¹, unit lower-triangular
      Inv(r, r) = 1.0;
      // Inv(r, c) = −Σ_{c ≤ m < r} β_r KK(r, m) Inv(m, c), by rows of Inv (contiguous).
      for (int64_t m = 0; m < r; ++m) {
        const double x = beta[r] * KK(r, m);
        for (int64_t c = 0; c <= m; ++c) Inv(r, c) -= x * Inv(m, c);
      }
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c <= r; ++c) Tm(r, c) = Inv(r, c) * beta[c];
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c <= r; ++c) {
        for (int64_t i = 0; i < K; ++i) W(r, i) += Tm(r, c) * ed(c, i) * k(c, i);
        for (int64_t j = 0; j < V; ++j) U(r, j) += Tm(r, c) * v(c, j);
      }
    }
  }

  // out[K] = D_rs = e^{Γ_r − Γ_s} per channel (s ≤ r).
  void decay_row(int64_t r, int64_t s, double* out) const {
    const double *er = &ed.a[r * K], *es = &eneg.a[s * K];
    if (all_split) {
      for (int64_t i = 0; i < K; ++i) out[i] = er[i] * es[i];
      return;
    }
    for (int64_t i = 0; i < K; ++i)
      out[i] = split[i] ? er[i] * es[i] : std::exp(gam(r, i) - gam(s, i));
  }

  // Ṽ = U − W S for the state S [K, V] at the chunk start.
  void new_values(const Mat2& S) {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t j = 0; j < V; ++j) Vn(r, j) = U(r, j);
      for (int64_t i = 0; i < K; ++i) {
        const double w = W(r, i);
        for (int64_t j = 0; j < V; ++j) Vn(r, j) -= w * S(i, j);
      }
    }
  }

  // S ← Diag(e^{Γ_n}) S + (e^{Γ_n − Γ} ⊙ k)ᵀ Ṽ.
  void advance(Mat2& S) const {
    for (int64_t i = 0; i < K; ++i) {  // row i of S in place: it reads only row i
      for (int64_t j = 0; j < V; ++j) S(i, j) *= en[i];
      for (int64_t r = 0; r < n; ++r) {
        const double e = E(r, i) * k(r, i);
        for (int64_t j = 0; j < V; ++j) S(i, j) += e * Vn(r, j);
      }
    }
  }
};

// o_r = (e^{Γ_r} ⊙ q_r)ᵀ S + Σ_{s≤r} QK_rs Ṽ_s for the chunk's rows, written to
// o[(t0 + r) * ld_o + j] (o points at the head's first column).
void chunk_output(const Chunk& c, int64_t t0, const Mat2& S, float* o, int64_t ld_o) {
  std::vector<double> acc(static_cast<size_t>(c.V));
  for (int64_t r = 0; r < c.n; ++r) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t i = 0; i < c.K; ++i) {
      const double qi = c.ed(r, i) * c.q(r, i);
      for (int64_t j = 0; j < c.V; ++j) acc[j] += qi * S(i, j);
    }
    for (int64_t t = 0; t <= r; ++t) {
      const double a = c.QK(r, t);
      for (int64_t j = 0; j < c.V; ++j) acc[j] += a * c.Vn(t, j);
    }
    for (int64_t j = 0; j < c.V; ++j) o[(t0 + r) * ld_o + j] = static_cast<float>(acc[j]);
  }
}

struct ChunkGrads {
  Mat2 dq, dk, dv, dgam;
  std::vector<double> dbeta;
  ChunkGrads(int64_t n, int64_t K, int64_t V)
      : dq(n, K), dk(n, K), dv(n, V), dgam(n, K), dbeta(static_cast<size_t>(n), 0.0) {}
};

// Through KK_rs = Σ_i k_r k_s D_rs and QK_rs = Σ_i q_r k_s D_rs (D_rs = e^{Γ_r − Γ_s}) into
// dk, dq and dΓ, given dKK, dQK [n, n] (s ≤ r), one token pair at a time.
void decays_back_pairwise(const Chunk& c, const Mat2& dKK, const Mat2& dQK, ChunkGrads& g) {
  const int64_t n = c.n, K = c.K;
  std::vector<double> D(static_cast<size_t>(K));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t s = 0; s <= r; ++s) {
      const double dkk = dKK(r, s), dqk = dQK(r, s);
      c.decay_row(r, s, D.data());
      for (int64_t i = 0; i < K; ++i) {
        const double kk_term = dkk * D[i], qk_term = dqk * D[i];
        g.dk(r, i) += kk_term * c.k(s, i);
        g.dk(s, i) += kk_term * c.k(r, i) + qk_term * c.q(r, i);
        g.dq(r, i) += qk_term * c.k(s, i);
        const double dd = (kk_term * c.k(r, i) + qk_term * c.q(r, i)) * c.k(s, i);
        g.dgam(r, i) += dd;
        g.dgam(s, i) -= dd;
      }
    }
  }
}

// The same when every channel's decays split (D_rs = e^{Γ_r} e^{−Γ_s}): with k⁻ = k ⊙ e^{−Γ},
// k⁺ = k ⊙ e^Γ, q⁺ = q ⊙ e^Γ, as three products over the pairs,
//   X = dKK k⁻, Y = dQK k⁻, Z = dKKᵀ k⁺ + dQKᵀ q⁺:
//   dk += e^Γ ⊙ X + e^{−Γ} ⊙ Z,  dq += e^Γ ⊙ Y,  dΓ += e^Γ ⊙ (k ⊙ X + q ⊙ Y) − k⁻ ⊙ Z.
void decays_back_split(const Chunk& c, const Mat2& dKK, const Mat2& dQK, ChunkGrads& g) {
  const int64_t n = c.n, K = c.K;
  Mat2 km(n, K), kp(n, K), qp(n, K), X(n, K), Y(n, K), Z(n, K);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < K; ++i) {
      km(r, i) = c.k(r, i) * c.eneg(r, i);
      kp(r, i) = c.k(r, i) * c.ed(r, i);
      qp(r, i) = c.q(r, i) * c.ed(r, i);
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t s = 0; s <= r; ++s) {
      const double a = dKK(r, s), b = dQK(r, s);
      for (int64_t i = 0; i < K; ++i) {
        X(r, i) += a * km(s, i);
        Y(r, i) += b * km(s, i);
        Z(s, i) += a * kp(r, i) + b * qp(r, i);
      }
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < K; ++i) {
      const double e = c.ed(r, i);
      g.dk(r, i) += e * X(r, i) + c.eneg(r, i) * Z(r, i);
      g.dq(r, i) += e * Y(r, i);
      g.dgam(r, i) += e * (c.k(r, i) * X(r, i) + c.q(r, i) * Y(r, i)) - km(r, i) * Z(r, i);
    }
  }
}

// One chunk's backward: dO [n, V] and dS (in: gradient of the state after the chunk; out: of
// the state before it), given the state S at its start.
void chunk_back(const Chunk& c, const Mat2& S, const Mat2& dO, Mat2& dS, ChunkGrads& g) {
  const int64_t n = c.n, K = c.K, V = c.V;
  Mat2 dVn(n, V), dTm(n, n), dW(n, K), dkd(n, K);
  for (int64_t r = 0; r < n; ++r) {  // dṼ = QKᵀ dO + kde dS'
    for (int64_t t = r; t < n; ++t) {
      const double a = c.QK(t, r);
      for (int64_t j = 0; j < V; ++j) dVn(r, j) += a * dO(t, j);
    }
    for (int64_t i = 0; i < K; ++i) {
      const double e = c.E(r, i) * c.k(r, i);
      for (int64_t j = 0; j < V; ++j) dVn(r, j) += e * dS(i, j);
    }
  }
  std::vector<double> dGn(static_cast<size_t>(K), 0.0);
  for (int64_t r = 0; r < n; ++r) {  // through kde = e^{Γ_n − Γ} ⊙ k
    for (int64_t i = 0; i < K; ++i) {
      double dkde = 0;
      for (int64_t j = 0; j < V; ++j) dkde += c.Vn(r, j) * dS(i, j);
      const double e = c.E(r, i);
      g.dk(r, i) += dkde * e;
      g.dgam(r, i) -= dkde * c.k(r, i) * e;
      dGn[i] += dkde * c.k(r, i) * e;
    }
  }
  for (int64_t i = 0; i < K; ++i) {  // S' ∋ Diag(e^{Γ_n}) S
    for (int64_t j = 0; j < V; ++j) dGn[i] += dS(i, j) * S(i, j) * c.en[i];
  }
  Mat2 dS_prev(K, V);
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < V; ++j) dS_prev(i, j) = c.en[i] * dS(i, j);
    for (int64_t r = 0; r < n; ++r) {
      const double a = c.ed(r, i) * c.q(r, i), w = c.W(r, i);
      for (int64_t j = 0; j < V; ++j) dS_prev(i, j) += a * dO(r, j) - w * dVn(r, j);
    }
  }
  for (int64_t r = 0; r < n; ++r) {  // o ∋ (e^Γ ⊙ q) S;  W: dW = −dṼ Sᵀ
    for (int64_t i = 0; i < K; ++i) {
      double dqd = 0, dw = 0;
      for (int64_t j = 0; j < V; ++j) {
        dqd += dO(r, j) * S(i, j);
        dw -= dVn(r, j) * S(i, j);
      }
      g.dq(r, i) += dqd * c.ed(r, i);
      g.dgam(r, i) += dqd * c.q(r, i) * c.ed(r, i);
      dW(r, i) = dw;
    }
  }
  for (int64_t r = 0; r < n; ++r) {  // W = Tm kd, U = Tm v:  dTm, dkd, dv
    for (int64_t s = 0; s <= r; ++s) {
      double acc = 0;
      for (int64_t i = 0; i < K; ++i) acc += dW(r, i) * c.ed(s, i) * c.k(s, i);
      for (int64_t j = 0; j < V; ++j) acc += dVn(r, j) * c.v(s, j);
      dTm(r, s) = acc;
    }
  }
  Mat2 dv(n, V);
  for (int64_t s = 0; s < n; ++s) {  // dkd = Tmᵀ dW, dv = Tmᵀ dṼ, by rows (contiguous)
    for (int64_t r = s; r < n; ++r) {
      const double t = c.Tm(r, s);
      for (int64_t i = 0; i < K; ++i) dkd(s, i) += t * dW(r, i);
      for (int64_t j = 0; j < V; ++j) dv(s, j) += t * dVn(r, j);
    }
    for (int64_t i = 0; i < K; ++i) {
      g.dk(s, i) += dkd(s, i) * c.ed(s, i);
      g.dgam(s, i) += dkd(s, i) * c.k(s, i) * c.ed(s, i);
    }
    for (int64_t j = 0; j < V; ++j) g.dv(s, j) += dv(s, j);
  }
  Mat2 dInv(n, n), dM(n, n), tmp(n, n);
  for (int64_t r = 0; r < n; ++r) {  // Tm = Inv Diag(β)
    for (int64_t s = 0; s <= r; ++s) {
      dInv(r, s) = dTm(r, s) * c.beta[s];
      g.dbeta[s] += dTm(r, s) * c.Inv(r, s);
    }
  }
  // dM = −Invᵀ dInv Invᵀ (lower-triangular factors; only s < r is used).
  for (int64_t a = 0; a < n; ++a)
    for (int64_t s = 0; s <= a; ++s) {
      double acc = 0;
      for (int64_t b = 0; b <= s; ++b) acc += dInv(a, b) * c.Inv(s, b);  // (dInv Invᵀ)[a, s]
      tmp(a, s) = acc;
    }
  for (int64_t r = 0; r < n; ++r) {  // dM(r, s) = −Σ_{a ≥ r} Inv(a, r) tmp(a, s), s < r
    for (int64_t a = r; a < n; ++a) {
      const double x = c.Inv(a, r);
      for (int64_t s = 0; s < r; ++s) dM(r, s) -= x * tmp(a, s);
    }
  }
  // M = Diag(β) KK; then KK and QK through k, q and the decays D. dkk, dqk [n, n]:
  Mat2 dKK(n, n), dQK(n, n);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t s = 0; s <= r; ++s) {
      if (s < r) {
        dKK(r, s) = dM(r, s) * c.beta[r];
        g.dbeta[r] += dM(r, s) * c.KK(r, s);
      }
      double dqk = 0;
      for (int64_t j = 0; j < V; ++j) dqk += dO(r, j) * c.Vn(s, j);
      dQK(r, s) = dqk;
    }
  }
  if (c.all_split) {
    decays_back_split(c, dKK, dQK, g);
  } else {
    decays_back_pairwise(c, dKK, dQK, g);
  }
  for (int64_t i = 0; i < K; ++i) g.dgam(n - 1, i) += dGn[i];
  dS = std::move(dS_prev);
}

void add_rows(float* dst, int64_t t0, int64_t H, int64_t h, const Mat2& m) {
  if (dst == nullptr) return;
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t i = 0; i < m.cols; ++i)
      dst[((t0 + r) * H + h) * m.cols + i] += static_cast<float>(m(r, i));
}

// One head's forward over the chunks: each chunk's start state and intermediates.
struct HeadChunks {
  std::vector<Mat2> starts;   // the state at each chunk's start
  std::vector<Chunk> chunks;  // each chunk's forward intermediates (Ṽ from its start state)
};

// The chunks of head h from the state S0 (nullptr: zero); leaves the final state in S_end and,
// when o is given, writes the head's outputs o [T, H, V] (rows of head h).
HeadChunks head_forward(const KdaInputs& in, KdaShape s, int64_t h, const float* S0, int64_t C,
                        float* S_end, float* o) {
  const int64_t T = s.T, K = s.K, V = s.V, n_chunks = (T + C - 1) / C;
  HeadChunks hc;
  hc.chunks.reserve(static_cast<size_t>(n_chunks));
  Mat2 S(K, V);
  if (S0 != nullptr) {
    for (int64_t i = 0; i < K * V; ++i) S.a[i] = S0[h * K * V + i];
  }
  for (int64_t ci = 0; ci < n_chunks; ++ci) {
    hc.starts.push_back(S);
    const int64_t t0 = ci * C;
    Chunk& c = hc.chunks.emplace_back(in, s, h, t0, std::min(C, T - t0));
    c.new_values(S);
    if (o != nullptr) chunk_output(c, t0, S, o + h * V, s.H * V);
    c.advance(S);
  }
  if (S_end != nullptr) {
    for (int64_t i = 0; i < K * V; ++i) S_end[h * K * V + i] = static_cast<float>(S.a[i]);
  }
  return hc;
}

void head_backward(const HeadChunks& hc, KdaShape s, int64_t h, const float* d_o, const KdaGrads& d,
                   int64_t C) {
  const int64_t T = s.T, K = s.K, V = s.V, n_chunks = (T + C - 1) / C;
  Mat2 dS(K, V);
  for (int64_t ci = n_chunks - 1; ci >= 0; --ci) {
    const int64_t t0 = ci * C, n = std::min(C, T - t0);
    const Chunk& c = hc.chunks[ci];
    Mat2 dO(n, V);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < V; ++j) dO(r, j) = d_o[((t0 + r) * s.H + h) * V + j];
    ChunkGrads g(n, K, V);
    chunk_back(c, hc.starts[ci], dO, dS, g);
    Mat2 dg(n, K);  // Γ = cumsum g: dg_t = Σ_{r ≥ t} dΓ_r
    for (int64_t i = 0; i < K; ++i) {
      double acc = 0;
      for (int64_t r = n - 1; r >= 0; --r) dg(r, i) = (acc += g.dgam(r, i));
    }
    add_rows(d.q, t0, s.H, h, g.dq);
    add_rows(d.k, t0, s.H, h, g.dk);
    add_rows(d.v, t0, s.H, h, g.dv);
    add_rows(d.g, t0, s.H, h, dg);
    if (d.beta != nullptr) {
      for (int64_t r = 0; r < n; ++r) d.beta[(t0 + r) * s.H + h] += static_cast<float>(g.dbeta[r]);
    }
  }
}

bool worth_threads(KdaShape s) { return s.T * s.K * s.V > 4096; }

}  // namespace

struct KdaChunkedSaved {
  KdaShape shape;
  int64_t chunk;
  std::vector<HeadChunks> heads;
};

void kda_chunked_bwd(const KdaInputs& in, KdaShape s, const float* S0, const float* d_o,
                     const KdaGrads& d, int64_t chunk) {
  parallel_for(s.H, worth_threads(s), [&](int64_t h) {
    head_backward(head_forward(in, s, h, S0, chunk, nullptr, nullptr), s, h, d_o, d, chunk);
  });
}

void kda_chunked_bwd_64(const KdaInputs& in, KdaShape s, const float* S0, const float* d_o,
                        const KdaGrads& d) {
  kda_chunked_bwd(in, s, S0, d_o, d, 64);
}

std::shared_ptr<const KdaChunkedSaved> kda_chunked_train_fwd(const KdaInputs& in, KdaShape s,
                                                             const float* S0, float* S, float* o,
                                                             int64_t chunk) {
  check(chunk >= 1, "kda chunked forward: chunk length ", chunk);
  auto saved = std::make_shared<KdaChunkedSaved>();
  saved->shape = s;
  saved->chunk = chunk;
  saved->heads.resize(static_cast<size_t>(s.H));
  parallel_for(s.H, worth_threads(s), [&](int64_t h) {
    saved->heads[static_cast<size_t>(h)] = head_forward(in, s, h, S0, chunk, S, o);
  });
  return saved;
}

void kda_chunked_bwd_saved(const KdaChunkedSaved& saved, KdaShape s, const float* d_o,
                           const KdaGrads& d) {
  check(
      saved.shape.T == s.T && saved.shape.H == s.H && saved.shape.K == s.K && saved.shape.V == s.V,
      "kda chunked backward: the saved forward is of another shape");
  parallel_for(s.H, worth_threads(s), [&](int64_t h) {
    head_backward(saved.heads[static_cast<size_t>(h)], s, h, d_o, d, saved.chunk);
  });
}

}  // namespace k3
