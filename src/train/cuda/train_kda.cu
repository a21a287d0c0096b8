// The training pass's sequence ops on the device (train_ops.h, "sequence ops"): the depthwise
// causal conv + SiLU (ops/conv1d) and the KDA delta rule (ops/kda), forward and backward, on B
// windows of T tokens (rows b·T + t), each from an empty history / zero state. fp32 throughout.
// No float atomics: the conv taps' gradient is summed from per-chunk partials by colsum_add,
// and every KDA reduction runs in a fixed order inside one block.
#include <algorithm>

#include "backend/cuda/reduce.cuh"
#include "backend/cuda/runtime.cuh"
#include "train/cuda/train_ops.h"

namespace k3::train::gpu {
namespace {

using cuda::check_launch;

// ---- conv1d + SiLU -----------------------------------------------------------------------
// Forward and the pre-activation gradient: a thread per (row, channel). The input gradient and
// the taps' partial sums: a thread per (window, chunk of kConvChunk tokens, channel), which
// walks its tokens in order; the [B · chunks, C·W] partials are then summed by colsum_add.

constexpr int kConvThreads = 256;
constexpr int kConvMaxW = 8;    // the taps' partial sums live in registers
constexpr int kConvChunk = 64;  // tokens per partial of dw

// a[row, c] = Σ_j w[c, j] · x[t-(W-1)+j, c] of row = b·T + t (token t of its window; tokens
// before the window are zeros), in the CPU op's order: tap W-1 (the current token) first.
__device__ float conv_pre(const float* x, const float* w, int64_t row, int64_t t, int64_t C, int W,
                          int64_t c) {
  const float* wc = w + c * W;
  float acc = wc[W - 1] * x[row * C + c];
  for (int j = 0; j < W - 1; ++j) {
    const int back = W - 1 - j;  // tokens before the current one
    if (t >= back) acc += wc[j] * x[(row - back) * C + c];
  }
  return acc;
}

__device__ float sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

// x, y [B·T, C].
__global__ void conv_fwd_kernel(const float* x, const float* w, int64_t n, int64_t T, int64_t C,
                                int W, float* y) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int64_t row = idx / C, c = idx % C;
  const float a = conv_pre(x, w, row, row % T, C, W, c);
  y[idx] = a * sigmoid(a);
}

// da [B·T, C] = dy · σ(a)(1 + a(1 − σ(a))).
__global__ void conv_da_kernel(const float* x, const float* w, int64_t n, int64_t T, int64_t C,
                               int W, const float* dy, float* da) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int64_t row = idx / C, c = idx % C;
  const float a = conv_pre(x, w, row, row % T, C, W, c);
  const float s = sigmoid(a);
  da[idx] = dy[idx] * s * (1.0f + a * (1.0f - s));
}

// Thread (part = b·chunks + chunk, c): dx[t, c] += Σ_j w[c, j] · da[t+(W-1)-j, c] for its tokens
// (taps past the window's end read nothing), and partial[part, c·W + j] = Σ_t da[t, c] ·
// x[t-(W-1)+j, c] over them. dx or partial may be null (that gradient skipped).
__global__ void conv_bwd_kernel(const float* x, const float* w, const float* da, int64_t parts,
                                int64_t chunks, int64_t T, int64_t C, int W, float* dx,
                                float* partial) {
  const int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (idx >= parts * C) return;
  const int64_t part = idx / C, c = idx % C;
  const int64_t b = part / chunks, t0 = (part % chunks) * kConvChunk;
  const int64_t t1 = t0 + kConvChunk < T ? t0 + kConvChunk : T;
  const float* wc = w + c * W;
  float acc[kConvMaxW] = {};
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t row = b * T + t;
    if (dx != nullptr) {
      float s = 0;
      for (int j = 0; j < W; ++j) {
        const int ahead = W - 1 - j;  // the output row tap j of which reads this token
        if (t + ahead < T) s += wc[j] * da[(row + ahead) * C + c];
      }
      dx[row * C + c] += s;
    }
    const float d = da[row * C + c];
#pragma unroll
    for (int j = 0; j < kConvMaxW; ++j) {
      const int back = W - 1 - j;
      if (j < W && t >= back) acc[j] += d * x[(row - back) * C + c];
    }
  }
  if (partial == nullptr) return;
  float* out = partial + part * C * W + c * W;
#pragma unroll
  for (int j = 0; j < kConvMaxW; ++j) {
    if (j < W) out[j] = acc[j];
  }
}

// ---- KDA delta rule ----------------------------------------------------------------------
// One block per (window b, head h), blockIdx.x = b·H + h, of R·Vp threads (≤ 512). The state
// S [K, V] lives in the threads' registers: thread tid owns, in column j = tid % Vp, the E rows
// i = r·E + e (r = tid / Vp, its row group). Vp is V rounded up to a power of two below 32 and
// to a multiple of 32 above, so the lanes of one row group's columns are whole warps or aligned
// parts of one; padding rows and columns hold zeros throughout. Sums over K (S̄ᵀk, Sᵀq, dSᵀk)
// go through shared memory, one partial per row group, added in row-group order by every
// thread of the column; sums over V (one per row i) are a shuffle butterfly within the row's
// lanes, then one partial per warp of the row in shared memory, added in order by the reader.

constexpr int kKdaThreads = 512;  // block size aimed at (R · Vp ≤ this, or one full warp)
constexpr int kKdaMaxK = 128, kKdaMaxV = 128;
constexpr int kKdaMaxRows = 512;  // R · E, the padded row count (checked by the launcher)
constexpr int kKdaRowParts = kKdaMaxV / 32;  // warp partials of one row

struct KdaDims {
  int H, K, V, Vp, R;
};

// One token's inputs in shared memory, zero beyond K / V; a = e^g per key channel.
struct KdaToken {
  float q[kKdaMaxRows], k[kKdaMaxRows], a[kKdaMaxRows];
  float v[kKdaMaxV], d_o[kKdaMaxV];
  float beta;
};

// The same token's values as thread tid loads them (index tid of each input), so the next
// token's loads fly while the current one is computed.
struct KdaTokenRegs {
  float q = 0, k = 0, a = 0, v = 0, d_o = 0, beta = 0;
};

__device__ KdaTokenRegs load_token(const float* q, const float* k, const float* v, const float* g,
                                   const float* beta, const float* d_o, int64_t row,
                                   const KdaDims& d) {
  // row = (b·T + t)·H + h
  KdaTokenRegs r;
  const int tid = threadIdx.x;
  if (tid < d.K) {
    r.q = q[row * d.K + tid];
    r.k = k[row * d.K + tid];
    r.a = g[row * d.K + tid];  // exponentiated when stored
  }
  if (tid < d.V) {
    r.v = v[row * d.V + tid];
    if (d_o != nullptr) r.d_o = d_o[row * d.V + tid];
  }
  if (tid == 0) r.beta = beta[row];
  return r;
}

__device__ void store_token(const KdaTokenRegs& r, const KdaDims& d, KdaToken& s) {
  const int tid = threadIdx.x;
  if (tid < d.K) {
    s.q[tid] = r.q;
    s.k[tid] = r.k;
    s.a[tid] = expf(r.a);
  }
  if (tid < d.V) {
    s.v[tid] = r.v;
    s.d_o[tid] = r.d_o;
  }
  if (tid == 0) s.beta = r.beta;
}

// Both token buffers zeroed (their padding stays zero); ends with a barrier.
__device__ void zero_tokens(KdaToken* tok) {
  float* p = reinterpret_cast<float*>(tok);
  const int n = static_cast<int>(2 * sizeof(KdaToken) / sizeof(float));
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = 0;
  __syncthreads();
}

// Σ over the row groups of column j of col [R, Vp] (the same order, so the same bits, in
// every thread of the column).
__device__ float column_total(const float* col, int j, const KdaDims& d) {
  float s = 0;
  for (int r = 0; r < d.R; ++r) s += col[r * d.Vp + j];
  return s;
}

// x summed over the Vp lanes of this thread's column group (lanes of one row of one warp):
// the xor butterfly leaves the same bits in every lane. Every thread of the block must call.
__device__ float lanes_sum(float x, const KdaDims& d) {
  const int width = d.Vp < 32 ? d.Vp : 32;
  for (int o = width / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Row i's part of a sum over V: one partial per warp of the row, into part [K, kKdaRowParts].
__device__ void row_partial(float x, int i, int j, const KdaDims& d, float* part) {
  x = lanes_sum(x, d);
  if ((j & 31) == 0 && i < d.K) part[i * kKdaRowParts + (j >> 5)] = x;
}

// The row's total (after a barrier), its warp partials added in order.
__device__ float row_total(const float* part, int i, const KdaDims& d) {
  const int n = (d.Vp + 31) / 32;
  float s = 0;
  for (int w = 0; w < n; ++w) s += part[i * kKdaRowParts + w];
  return s;
}

// This thread's column j, first row i0 and count n of its rows i0 + e (e < n ≤ E; none in a
// padding column).
struct KdaElems {
  int j, i0, n;
};

template <int E>
__device__ KdaElems kda_elems(const KdaDims& d) {
  const int j = threadIdx.x % d.Vp, i0 = threadIdx.x / d.Vp * E;
  return {j, i0, j < d.V ? min(E, max(d.K - i0, 0)) : 0};
}

// Forward, token by token (ops/kda/kda_recurrent.cpp), writing S_0 … S_T to states [B, H,
// T+1, K, V] and o [B·T, H, V]. Three barriers a token: inputs staged, Sᵀk partials, Sᵀq
// partials. Token buffers alternate, so staging t+1 never races the readers of t.
template <int E>
__global__ void __launch_bounds__(kKdaThreads)
    kda_fwd_kernel(const float* q, const float* k, const float* v, const float* g,
                   const float* beta, int64_t T, KdaDims d, float* states, float* o) {
  __shared__ KdaToken tok[2];
  __shared__ float colU[kKdaThreads], colO[kKdaThreads];  // [R, Vp]
  const int tid = threadIdx.x;
  const KdaElems m = kda_elems<E>(d);
  const int64_t bh = blockIdx.x, b = bh / d.H, h = bh % d.H, KV = int64_t{d.K} * d.V;
  float* S_t = states + bh * (T + 1) * KV + int64_t{m.i0} * d.V + m.j;  // (i0, j) of S_0
  zero_tokens(tok);
  float S[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    S[e] = 0;
    if (e < m.n) S_t[e * d.V] = 0;
  }
  KdaTokenRegs next;
  if (T > 0) next = load_token(q, k, v, g, beta, nullptr, b * T * d.H + h, d);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t row = (b * T + t) * d.H + h;
    KdaToken& x = tok[t & 1];
    store_token(next, d, x);
    if (t + 1 < T) next = load_token(q, k, v, g, beta, nullptr, row + d.H, d);
    __syncthreads();
    const float *a = x.a + m.i0, *kk = x.k + m.i0, *qq = x.q + m.i0;  // this thread's rows
    float part = 0;                                                   // S̄ = Diag(a) S;  S̄ᵀk
#pragma unroll
    for (int e = 0; e < E; ++e) {
      S[e] *= a[e];
      part += S[e] * kk[e];
    }
    colU[tid] = part;
    __syncthreads();
    const float u = x.v[m.j] - column_total(colU, m.j, d);  // u = v − S̄ᵀk
    S_t += KV;
    part = 0;  // S = S̄ + β k uᵀ;  Sᵀq
#pragma unroll
    for (int e = 0; e < E; ++e) {
      S[e] += x.beta * kk[e] * u;
      part += S[e] * qq[e];
      if (e < m.n) S_t[e * d.V] = S[e];
    }
    colO[tid] = part;
    __syncthreads();
    if (tid < d.V) o[row * d.V + tid] = column_total(colO, tid, d);  // row group 0
  }
}

// Backward (ops/kda/kda_bwd.cpp), t from T-1 down to 0, dS (the gradient of S_t) in registers,
// S_{t-1} and S_t read from states. Four barriers a token: inputs staged; S̄ᵀk and (S_t do)
// partials; dSᵀk and (dS u) partials; (S̄ du) and (dS̄ ⊙ S_{t-1}) partials. The per-row results
// (dq, dk, dg, dβ) are written after the last one, from buffers the next token first writes
// after its own first barrier.
template <int E>
__global__ void __launch_bounds__(kKdaThreads)
    kda_bwd_kernel(const float* q, const float* k, const float* v, const float* g,
                   const float* beta, int64_t T, KdaDims d, const float* states, const float* d_o,
                   float* dq, float* dk, float* dv, float* dg, float* dbeta) {
  __shared__ KdaToken tok[2];
  __shared__ float colU[kKdaThreads], colD[kKdaThreads];  // [R, Vp]
  // [K, kKdaRowParts]: S_t do, dS u, S̄ du, dS̄ ⊙ S_{t-1}, each summed over V
  __shared__ float rowQ[kKdaMaxK * kKdaRowParts], rowU[kKdaMaxK * kKdaRowParts];
  __shared__ float rowS[kKdaMaxK * kKdaRowParts], rowA[kKdaMaxK * kKdaRowParts];
  const int tid = threadIdx.x;
  const KdaElems m = kda_elems<E>(d);
  const int j = m.j;
  const int64_t bh = blockIdx.x, b = bh / d.H, h = bh % d.H, KV = int64_t{d.K} * d.V;
  const float* S_0 = states + bh * (T + 1) * KV + int64_t{m.i0} * d.V + j;  // (i0, j) of S_0
  zero_tokens(tok);
  float dS[E], prev[E];
#pragma unroll
  for (int e = 0; e < E; ++e) dS[e] = 0;  // the final state gets no gradient
  KdaTokenRegs next;
  if (T > 0) next = load_token(q, k, v, g, beta, d_o, ((b + 1) * T - 1) * d.H + h, d);
  for (int64_t t = T - 1; t >= 0; --t) {
    const int64_t row = (b * T + t) * d.H + h;
    KdaToken& x = tok[t & 1];
    store_token(next, d, x);
    if (t > 0) next = load_token(q, k, v, g, beta, d_o, row - d.H, d);
    const float* S_prev = S_0 + t * KV;  // S_{t-1}; S_t follows it
#pragma unroll
    for (int e = 0; e < E; ++e) prev[e] = e < m.n ? S_prev[e * d.V] : 0.0f;
    __syncthreads();
    const float *a = x.a + m.i0, *kk = x.k + m.i0, *qq = x.q + m.i0;  // this thread's rows
    const float do_j = x.d_o[j];
    // u's S̄ᵀk (the forward's products, summed in its order);  dq = S_t do;  dS += q doᵀ
    float part = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float cur = e < m.n ? S_prev[KV + e * d.V] : 0.0f;  // S_t
      part += a[e] * prev[e] * kk[e];
      row_partial(cur * do_j, m.i0 + e, j, d, rowQ);
      dS[e] += qq[e] * do_j;
    }
    colU[tid] = part;
    __syncthreads();
    // u = v − S̄ᵀk;  du = β dSᵀk (below);  dβ, dk from dS u
    const float u = x.v[j] - column_total(colU, j, d);
    part = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      part += dS[e] * kk[e];
      row_partial(dS[e] * u, m.i0 + e, j, d, rowU);
    }
    colD[tid] = part;
    __syncthreads();
    // dk −= S̄ du;  dS̄ = dS − k duᵀ;  dg = a ⊙ rowsum(dS̄ ⊙ S_{t-1});  dS_{t-1} = Diag(a) dS̄
    const float du = x.beta * column_total(colD, j, d);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float dsb = dS[e] - kk[e] * du;
      row_partial(a[e] * prev[e] * du, m.i0 + e, j, d, rowS);
      row_partial(dsb * prev[e], m.i0 + e, j, d, rowA);
      dS[e] = a[e] * dsb;
    }
    if (tid < d.V) dv[row * d.V + tid] += du;  // row group 0 (j = tid)
    __syncthreads();
    if (tid < d.K) {
      const int i = tid;
      dq[row * d.K + i] += row_total(rowQ, i, d);
      dk[row * d.K + i] += x.beta * row_total(rowU, i, d) - row_total(rowS, i, d);
      dg[row * d.K + i] += x.a[i] * row_total(rowA, i, d);
    }
    if (tid < 32) {  // dβ = kᵀ dS u, by warp 0 (the block has at least one full warp)
      float s = 0;
      for (int i = tid; i < d.K; i += 32) s += x.k[i] * row_total(rowU, i, d);
      s = cuda::warp_sum(s);
      if (tid == 0) dbeta[row] += s;
    }
  }
}

// The block's shape for K, V: Vp, R (row groups), E (rows per thread, a power of two ≤ 32).
struct KdaLaunch {
  KdaDims d;
  int log2_E, threads;
};

KdaLaunch kda_launch(int64_t H, int64_t K, int64_t V, const char* op) {
  check(K >= 1 && K <= kKdaMaxK && V >= 1 && V <= kKdaMaxV, op, ": K ", K, ", V ", V, " (1 to ",
        kKdaMaxK, " and 1 to ", kKdaMaxV, " supported)");
  int Vp = 1;
  while (Vp < V && Vp < 32) Vp *= 2;
  if (V > 32) Vp = static_cast<int>((V + 31) / 32 * 32);
  // As many row groups as fit kKdaThreads (at most K) give E; then the fewest that cover K at
  // E rows each, but at least one full warp.
  const int min_groups = 32 / std::min(Vp, 32), k = static_cast<int>(K);
  const int groups = std::max(std::min(k, kKdaThreads / Vp), min_groups);
  int log2_E = 0;
  while ((groups << log2_E) < k) ++log2_E;
  const int E = 1 << log2_E, R = std::max((k + E - 1) / E, min_groups);
  check(E <= 32 && R * E <= kKdaMaxRows && R * Vp <= kKdaThreads, op, ": no block shape for K ", K,
        ", V ", V);
  return {{static_cast<int>(H), static_cast<int>(K), static_cast<int>(V), Vp, R}, log2_E, R * Vp};
}

// The kernels by log2 E.
constexpr decltype(&kda_fwd_kernel<1>) kFwdKernels[] = {kda_fwd_kernel<1>,  kda_fwd_kernel<2>,
                                                        kda_fwd_kernel<4>,  kda_fwd_kernel<8>,
                                                        kda_fwd_kernel<16>, kda_fwd_kernel<32>};
constexpr decltype(&kda_bwd_kernel<1>) kBwdKernels[] = {kda_bwd_kernel<1>,  kda_bwd_kernel<2>,
                                                        kda_bwd_kernel<4>,  kda_bwd_kernel<8>,
                                                        kda_bwd_kernel<16>, kda_bwd_kernel<32>};

}  // namespace

void conv1d_silu_fwd(const float* x, const float* w, int64_t B, int64_t T, int64_t C, int64_t W,
                     float* y) {
  check(W >= 1, "conv1d_silu_fwd: kernel width ", W);
  const int64_t n = B * T * C;
  if (n == 0) return;
  cuda::launch(conv_fwd_kernel, cuda::blocks_for(n, kConvThreads), kConvThreads, 0, x, w, n, T, C,
               static_cast<int>(W), y);
  check_launch("conv1d_silu_fwd");
}

void conv1d_silu_bwd(const float* x, const float* w, int64_t B, int64_t T, int64_t C, int64_t W,
                     const float* dy, float* dx, float* dw) {
  check(W >= 1 && W <= kConvMaxW, "conv1d_silu_bwd: kernel width ", W, " (1 to ", kConvMaxW,
        " supported)");
  const int64_t n = B * T * C;
  if (n == 0 || (dx == nullptr && dw == nullptr)) return;
  cuda::Scratch da(static_cast<size_t>(n) * sizeof(float));  // [B·T, C]
  float* pda = static_cast<float*>(da.get());
  cuda::launch(conv_da_kernel, cuda::blocks_for(n, kConvThreads), kConvThreads, 0, x, w, n, T, C,
               static_cast<int>(W), dy, pda);
  check_launch("conv1d_silu_bwd da");
  const int64_t chunks = (T + kConvChunk - 1) / kConvChunk, parts = B * chunks;
  cuda::Scratch partial;  // [B·chunks, C·W]
  if (dw != nullptr) partial = cuda::Scratch(static_cast<size_t>(parts * C * W) * sizeof(float));
  float* ppart = static_cast<float*>(partial.get());
  cuda::launch(conv_bwd_kernel, cuda::blocks_for(parts * C, kConvThreads), kConvThreads, 0, x, w,
               static_cast<const float*>(pda), parts, chunks, T, C, static_cast<int>(W), dx, ppart);
  check_launch("conv1d_silu_bwd");
  if (dw != nullptr) colsum_add(ppart, parts, C * W, dw);  // -> [C, W]
}

void kda_core_fwd(const float* q, const float* k, const float* v, const float* g, const float* beta,
                  int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, float* states, float* o) {
  const KdaLaunch l = kda_launch(H, K, V, "kda_core_fwd");
  if (B * H == 0) return;
  cuda::launch(kFwdKernels[l.log2_E], dim3(static_cast<unsigned>(B * H)), dim3(l.threads), 0, q, k,
               v, g, beta, T, l.d, states, o);
  check_launch("kda_core_fwd");
}

void kda_core_bwd(const float* q, const float* k, const float* v, const float* g, const float* beta,
                  int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, const float* states,
                  const float* d_o, float* dq, float* dk, float* dv, float* dg, float* dbeta) {
  const KdaLaunch l = kda_launch(H, K, V, "kda_core_bwd");
  if (B * H * T == 0) return;
  cuda::launch(kBwdKernels[l.log2_E], dim3(static_cast<unsigned>(B * H)), dim3(l.threads), 0, q, k,
               v, g, beta, T, l.d, states, d_o, dq, dk, dv, dg, dbeta);
  check_launch("kda_core_bwd");
}

}  // namespace k3::train::gpu
