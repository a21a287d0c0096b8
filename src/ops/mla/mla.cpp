#include "ops/mla/mla.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/cpu_isa.h"
#include "core/dot8.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/mla/mla_kernels.h"

namespace k3 {
namespace {

constexpr int64_t kKeyTile = 64;  // keys scored together before the online-softmax update

// In-place softmax of p[0..n).
void softmax(float* p, int64_t n) {
  float mx = p[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, p[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::exp(p[i] - mx);
    sum += p[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) p[i] *= inv;
}

// Running softmax-weighted sum over key tiles: acc = Σ e^{s-m} x, sum = Σ e^{s-m}.
struct OnlineSoftmax {
  float max = -INFINITY;
  double sum = 0;
  // Rescales for a tile of scores p[0..n) (turned into weights in place); returns the
  // factor to apply to the accumulator.
  float absorb(float* p, int64_t n) {
    float tile_max = p[0];
    for (int64_t i = 1; i < n; ++i) tile_max = std::max(tile_max, p[i]);
    const float new_max = std::max(max, tile_max);
    const float rescale = std::exp(max - new_max);  // 0 on the first tile
    sum *= rescale;
    for (int64_t i = 0; i < n; ++i) sum += (p[i] = std::exp(p[i] - new_max));
    max = new_max;
    return rescale;
  }
};

// The SIMD scores and weighted sum for this shape, or nullptr (the portable loops).
const MlaAbsorbedKernels* absorbed_kernels(const MlaShape& s) {
  if (s.Dc % 16 != 0 || s.Dr % 16 != 0) return nullptr;
  return isa_pick<const MlaAbsorbedKernels>(nullptr, nullptr, &avx512::kMlaAbsorbedKernels);
}

// One query of one head in the absorbed form: ob [Dc] = Σ_τ p_τ ĉ_τ over τ < n.
void absorbed_query(const float* qt, const float* qr, const PagedRows& cache, int64_t n, MlaShape s,
                    float scale, float* p, float* ob) {
  const int64_t Dc = s.Dc, Dr = s.Dr;
  const MlaAbsorbedKernels* k = absorbed_kernels(s);
  const float* rows[kKeyTile];
  OnlineSoftmax sm;
  std::fill(ob, ob + Dc, 0.0f);
  for (int64_t t0 = 0; t0 < n; t0 += kKeyTile) {
    const int64_t m = std::min(kKeyTile, n - t0);
    for (int64_t j = 0; j < m; ++j) rows[j] = cache.row(t0 + j);
    if (k != nullptr) {
      k->scores(qt, qr, rows, m, Dc, Dr, scale, p);
      const float rescale = sm.absorb(p, m);
      k->accumulate(p, rows, m, Dc, rescale, ob);
      continue;
    }
    for (int64_t j = 0; j < m; ++j)
      p[j] = (dot8(qt, rows[j], Dc) + dot8(qr, rows[j] + Dc, Dr)) * scale;
    const float rescale = sm.absorb(p, m);
    for (int64_t c = 0; c < Dc; ++c) ob[c] *= rescale;
    for (int64_t j = 0; j < m; ++j) {
      for (int64_t c = 0; c < Dc; ++c) ob[c] += p[j] * rows[j][c];
    }
  }
  const float inv = static_cast<float>(1.0 / sm.sum);
  for (int64_t c = 0; c < Dc; ++c) ob[c] *= inv;
}

// Rows r0 … r0+n-1 of a BF16 or F32 matrix, as a matrix.
Mat row_view(const Mat& m, int64_t r0, int64_t n) {
  const size_t elem = m.format == MatFormat::bf16 ? 2 : 4;
  return {n, m.cols, m.format, static_cast<const char*>(m.data) + r0 * m.cols * elem, nullptr};
}

}  // namespace

void mla_attention_expanded_loop(const float* q, const float* k, const float* v, MlaShape s,
                                 float* o) {
  const int64_t H = s.H, Dq = s.Dn + s.Dr, Dv = s.Dv, S = s.n_past + s.T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dq));
  parallel_for(s.T * H, s.T * H > 1, [&](int64_t th) {  // one (token, head) pair each
    const int64_t t = th / H, h = th % H;
    float* p = thread_scratch<float, struct MlaScoresTag>(static_cast<size_t>(S));
    const int64_t n = s.n_past + t + 1;  // visible keys
    const float* qh = q + (t * H + h) * Dq;
    for (int64_t tau = 0; tau < n; ++tau) {
      const float* kh = k + (tau * H + h) * Dq;
      float acc = 0;
      for (int64_t i = 0; i < Dq; ++i) acc += qh[i] * kh[i];
      p[tau] = acc * scale;
    }
    softmax(p, n);
    float* oh = o + (t * H + h) * Dv;
    for (int64_t j = 0; j < Dv; ++j) oh[j] = 0;
    for (int64_t tau = 0; tau < n; ++tau) {
      const float* vh = v + (tau * H + h) * Dv;
      for (int64_t j = 0; j < Dv; ++j) oh[j] += p[tau] * vh[j];
    }
  });
}

void mla_attention_absorbed_head(const float* q, const PagedRows& cache,
                                 const MlaAbsorbedWeights& w, MlaShape s, int64_t h, float* o) {
  const int64_t H = s.H, Dq = s.Dn + s.Dr, Dc = s.Dc, Dn = s.Dn, Dv = s.Dv, T = s.T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dq));
  float* qn = thread_scratch<float, struct MlaQnTag>(static_cast<size_t>(T * Dn));  // [T, Dn]
  float* qt = thread_scratch<float, struct MlaQtTag>(static_cast<size_t>(T * Dc));  // [T, Dc]
  float* ob = thread_scratch<float, struct MlaObTag>(static_cast<size_t>(T * Dc));  // [T, Dc]
  float* ov = thread_scratch<float, struct MlaOvTag>(static_cast<size_t>(T * Dv));  // [T, Dv]
  float* p = thread_scratch<float, struct MlaTileTag>(kKeyTile);
  for (int64_t t = 0; t < T; ++t) std::copy_n(q + (t * H + h) * Dq, Dn, qn + t * Dn);
  linear(qn, T, row_view(w.uk_t, h * Dc, Dc), qt);  // q̃ = W_UKᵀ q^N  [T, Dc]
  for (int64_t t = 0; t < T; ++t) {
    absorbed_query(qt + t * Dc, q + (t * H + h) * Dq + Dn, cache, s.n_past + t + 1, s, scale, p,
                   ob + t * Dc);
  }
  linear(ob, T, row_view(w.kv_b, h * (Dn + Dv) + Dn, Dv), ov);  // o = W_UV ō  [T, Dv]
  for (int64_t t = 0; t < T; ++t) std::copy_n(ov + t * Dv, Dv, o + (t * H + h) * Dv);
}

void mla_attention_absorbed(const float* q, const PagedRows& cache, const MlaAbsorbedWeights& w,
                            MlaShape s, float* o) {
  // Heads in parallel once a head's work (its two small projections and the scores over the
  // cache) outweighs the hand-off between threads.
  const int64_t per_head = (s.Dc * (s.Dn + s.Dv) + (s.n_past + s.T) * (s.Dc + s.Dr)) * s.T;
  parallel_for(s.H, s.H * per_head > kMlaParallelWork,
               [&](int64_t h) { mla_attention_absorbed_head(q, cache, w, s, h, o); });
}

void mla_attention_expanded_ref(const float* q, const float* k, const float* v, MlaShape s,
                                float* o) {
  const int64_t H = s.H, Dq = s.Dn + s.Dr, Dv = s.Dv;
  std::vector<double> p(static_cast<size_t>(s.n_past + s.T));
  for (int64_t t = 0; t < s.T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q + (t * H + h) * Dq;
      const int64_t n = s.n_past + t + 1;
      double mx = -INFINITY, sum = 0;
      for (int64_t tau = 0; tau < n; ++tau) {
        const float* kh = k + (tau * H + h) * Dq;
        double acc = 0;
        for (int64_t i = 0; i < Dq; ++i) acc += double(qh[i]) * kh[i];
        p[tau] = acc / std::sqrt(double(Dq));
        mx = std::max(mx, p[tau]);
      }
      for (int64_t tau = 0; tau < n; ++tau) sum += (p[tau] = std::exp(p[tau] - mx));
      for (int64_t j = 0; j < Dv; ++j) {
        double acc = 0;
        for (int64_t tau = 0; tau < n; ++tau) acc += p[tau] * v[(tau * H + h) * Dv + j];
        o[(t * H + h) * Dv + j] = static_cast<float>(acc / sum);
      }
    }
  }
}

void mla_attention_ref(const float* q, const PagedRows& cache, const MlaAbsorbedWeights& w,
                       MlaShape s, float* o) {
  const Mat& kv_b = w.kv_b;
  const int64_t H = s.H, Dn = s.Dn, Dr = s.Dr, Dv = s.Dv, Dc = s.Dc, Dq = Dn + Dr;
  const int64_t S = s.n_past + s.T;
  std::vector<float> wrow(static_cast<size_t>(Dc));
  std::vector<double> kv(static_cast<size_t>(S * H * (Dn + Dv)));  // [S, H, Dn+Dv] expanded
  for (int64_t r = 0; r < H * (Dn + Dv); ++r) {
    mat_row(kv_b, r, wrow.data());
    for (int64_t tau = 0; tau < S; ++tau) {
      double acc = 0;
      for (int64_t c = 0; c < Dc; ++c) acc += double(wrow[c]) * cache.row(tau)[c];
      kv[tau * H * (Dn + Dv) + r] = acc;
    }
  }
  std::vector<double> p(static_cast<size_t>(S));
  for (int64_t t = 0; t < s.T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q + (t * H + h) * Dq;
      const int64_t n = s.n_past + t + 1;
      double mx = -INFINITY, sum = 0;
      for (int64_t tau = 0; tau < n; ++tau) {
        const double* kh = &kv[(tau * H + h) * (Dn + Dv)];
        double acc = 0;
        for (int64_t i = 0; i < Dn; ++i) acc += double(qh[i]) * kh[i];
        for (int64_t i = 0; i < Dr; ++i) acc += double(qh[Dn + i]) * cache.row(tau)[Dc + i];
        p[tau] = acc / std::sqrt(double(Dq));
        mx = std::max(mx, p[tau]);
      }
      for (int64_t tau = 0; tau < n; ++tau) sum += (p[tau] = std::exp(p[tau] - mx));
      for (int64_t j = 0; j < Dv; ++j) {
        double acc = 0;
        for (int64_t tau = 0; tau < n; ++tau)
          acc += p[tau] * kv[(tau * H + h) * (Dn + Dv) + Dn + j];
        o[(t * H + h) * Dv + j] = static_cast<float>(acc / sum);
      }
    }
  }
}

const OpTable<MlaExpandedFn, MlaExpandedBwdFn> kMlaExpandedOp =
    register_op<MlaExpandedFn, MlaExpandedBwdFn>({.name = "mla_expanded",
                                                  .ref = mla_attention_expanded_ref,
                                                  .cpu = mla_attention_expanded,
                                                  .cuda = K3_CUDA_IMPL(mla_expanded_cuda),
                                                  .bwd = mla_attention_expanded_bwd});
// Sequence i's rows of q and o, and its own shape.
template <typename Fn>
void each_batch_seq(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                    const MlaAbsorbedWeights& w, MlaShape dims, float* o, Fn fn) {
  const int64_t Dq = dims.Dn + dims.Dr;
  for (int64_t i = 0; i < n_seqs; ++i) {
    const MlaBatchSeq& s = seqs[i];
    if (s.n == 0) continue;
    MlaShape sh = dims;
    sh.T = s.n;
    sh.n_past = s.n_past;
    fn(q + s.t0 * dims.H * Dq, s.cache, w, sh, o + s.t0 * dims.H * dims.Dv);
  }
}

void mla_absorbed_batch(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                        const MlaAbsorbedWeights& w, MlaShape dims, float* o) {
  each_batch_seq(q, seqs, n_seqs, w, dims, o, mla_attention_absorbed);
}

void mla_absorbed_batch_ref(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                            const MlaAbsorbedWeights& w, MlaShape dims, float* o) {
  each_batch_seq(q, seqs, n_seqs, w, dims, o, mla_attention_ref);
}

const OpTable<MlaAbsorbedBatchFn> kMlaAbsorbedBatchOp =
    register_op<MlaAbsorbedBatchFn>({.name = "mla_absorbed_batch",
                                     .ref = mla_absorbed_batch_ref,
                                     .cpu = mla_absorbed_batch,
                                     .cuda = K3_CUDA_IMPL(mla_absorbed_batch_cuda)});
const OpTable<MlaAbsorbedFn> kMlaAbsorbedOp =
    register_op<MlaAbsorbedFn>({.name = "mla_absorbed",
                                .ref = mla_attention_ref,
                                .cpu = mla_attention_absorbed,
                                .cuda = K3_CUDA_IMPL(mla_absorbed_cuda)});

}  // namespace k3
