// Device kernels of the training pass (train_ops.h): the expanded causal MLA attention and its
// backward, the AttnRes mix, the MoE router and the routed experts' gathers and combine.
//
// Attention is a chain of batched fp32 products over each (window, head)'s [T, T] matrix,
// one 64×64 output tile per block, with the causal structure used to skip work (tiles above the
// diagonal, reductions past it), and warp-per-row kernels for the softmax and its gradient:
//   forward   S = q kᵀ (into probs), P = causal softmax(scale · S) in place, o = P v;
//   backward  dv += Pᵀ do, dP = do vᵀ, dS = scale · P ⊙ (dP − rowsum(P ⊙ dP)), dq += dS k,
//             dk += dSᵀ q, dS in scratch for a group of (window, head) pairs at a time.
// Every output element is summed by one thread in a fixed order (no atomics): bit-identical
// results from run to run.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/reduce.cuh"
#include "backend/cuda/runtime.cuh"
#include "core/error.h"
#include "train/cuda/train_ops.h"

namespace k3::train::gpu {
namespace {

using cuda::blocks_for;
using cuda::check_launch;

constexpr int kThreads = 256;  // element-wise kernels
constexpr int kRowWarps = 8;   // row kernels: one warp per row

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// ---- batched tiled products ------------------------------------------------------------

constexpr int kTile = 64;                           // output tile: kTile × kTile
constexpr int kSlice = 16;                          // reduction depth per shared-memory stage
constexpr int kSub = 16;                            // threads per tile side
constexpr int kPer = kTile / kSub;                  // outputs per thread per side (strided by kSub)
constexpr int kProductThreads = kSub * kSub;        // 256
constexpr int kPad = kTile + 2;                     // slice-major stores of a warp hit 32 banks
constexpr int64_t kMaxBatch = 65535;                // grid.z limit
constexpr int64_t kGradScratch = int64_t{1} << 27;  // floats of dS per backward group (512 MiB)

// One operand of a batched product: element (r, c) of batch entry z (window b = z / H, head
// h = z % H, zl = z − the launch's first entry) at p + zl·sz + b·sb + h·sh + r·sr + c·sc.
struct Operand {
  const float* p;
  int64_t sz, sb, sh, sr, sc;
};
struct Output {  // the same, columns contiguous
  float* p;
  int64_t sz, sb, sh, sr;
};

// Which part of a product is known to be zero (the causal structure of P and dS).
enum Mask : int {
  kFull = 0,      // nothing
  kLowerOut = 1,  // outputs above the diagonal are not needed: tiles wholly above are skipped
  kLowerA = 2,    // A(i, κ) = 0 for κ > i: the reduction stops at the tile's last row
  kUpperA = 3,    // A(i, κ) = 0 for κ < i: the reduction starts at the tile's first row
};

// C [M, N] = A [M, K] · B [K, N] (kAdd: C +=) for batch entries z0 + blockIdx.z. 16×16
// threads, each summing 4×4 outputs (rows ty + 16r, columns tx + 16c) in κ order; shared
// slices stored κ-major so each warp's reads broadcast (A) or hit consecutive banks (B).
template <bool kAdd>
__global__ void product_kernel(Operand a, Operand b, Output c, int64_t M, int64_t N, int64_t K,
                               int64_t H, int64_t z0, int mask) {
  __shared__ float as[kSlice][kPad];  // as[κ][i]
  __shared__ float bs[kSlice][kPad];  // bs[κ][j]
  const int64_t i0 = int64_t{blockIdx.y} * kTile, j0 = int64_t{blockIdx.x} * kTile;
  const int64_t i1 = min(M, i0 + kTile);
  if (mask == kLowerOut && j0 >= i1) return;  // the whole block: its tile is above the diagonal
  const int64_t zl = blockIdx.z, z = z0 + zl, bw = z / H, hd = z % H;
  const float* pa = a.p + zl * a.sz + bw * a.sb + hd * a.sh;
  const float* pb = b.p + zl * b.sz + bw * b.sb + hd * b.sh;
  float* pc = c.p + zl * c.sz + bw * c.sb + hd * c.sh;
  const int64_t k_lo = mask == kUpperA ? i0 : 0, k_hi = mask == kLowerA ? min(K, i1) : K;
  const int tid = threadIdx.x, tx = tid % kSub, ty = tid / kSub;
  const bool a_rows = a.sc == 1;  // A's rows contiguous: load along κ
  const bool b_rows = b.sc == 1;  // B's rows contiguous: load along j
  float acc[kPer][kPer] = {};
  for (int64_t k0 = k_lo; k0 < k_hi; k0 += kSlice) {
    // Consecutive threads walk each operand's unit-stride axis (coalesced loads).
    for (int l = tid; l < kSlice * kTile; l += kProductThreads) {
      const int ai = a_rows ? l / kSlice : l % kTile, ak = a_rows ? l % kSlice : l / kTile;
      const int64_t gi = i0 + ai, gak = k0 + ak;
      as[ak][ai] = gi < M && gak < k_hi ? pa[gi * a.sr + gak * a.sc] : 0.0f;
      const int bj = b_rows ? l % kTile : l / kSlice, bk = b_rows ? l / kTile : l % kSlice;
      const int64_t gj = j0 + bj, gbk = k0 + bk;
      bs[bk][bj] = gj < N && gbk < k_hi ? pb[gbk * b.sr + gj * b.sc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSlice; ++kk) {
      float av[kPer], bv[kPer];
#pragma unroll
      for (int r = 0; r < kPer; ++r) av[r] = as[kk][ty + kSub * r];
#pragma unroll
      for (int q = 0; q < kPer; ++q) bv[q] = bs[kk][tx + kSub * q];
#pragma unroll
      for (int r = 0; r < kPer; ++r)
#pragma unroll
        for (int q = 0; q < kPer; ++q) acc[r][q] = fmaf(av[r], bv[q], acc[r][q]);
    }
    __syncthreads();  // the slices are overwritten next
  }
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int64_t i = i0 + ty + kSub * r;
    if (i >= M) continue;
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const int64_t j = j0 + tx + kSub * q;
      if (j >= N) continue;
      float* out = pc + i * c.sr + j;
      *out = kAdd ? *out + acc[r][q] : acc[r][q];
    }
  }
}

// The product for batch entries z0 … z0+nz-1 (nz ≤ kMaxBatch).
void product(bool add, Operand a, Operand b, Output c, int64_t M, int64_t N, int64_t K, int64_t H,
             int64_t z0, int64_t nz, Mask mask, const char* what) {
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile),
                  static_cast<unsigned>((M + kTile - 1) / kTile), static_cast<unsigned>(nz));
  if (add) {
    cuda::launch(product_kernel<true>, grid, kProductThreads, 0, a, b, c, M, N, K, H, z0,
                 static_cast<int>(mask));
  } else {
    cuda::launch(product_kernel<false>, grid, kProductThreads, 0, a, b, c, M, N, K, H, z0,
                 static_cast<int>(mask));
  }
  check_launch(what);
}

// ---- attention row kernels ---------------------------------------------------------------

// probs rows [rows, T] (row = z·T + t): raw scores in, causal softmax(scale · s) out, zero
// above the diagonal. The max is taken on the raw scores (scale > 0), as the CPU op does.
__global__ void causal_softmax_kernel(float* probs, int64_t rows, int64_t T, float scale) {
  const int64_t row = blockIdx.x * int64_t{kRowWarps} + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp
  const int lane = threadIdx.x % 32;
  const int64_t n = row % T + 1;  // keys query t sees
  float* p = probs + row * T;
  float mx = -INFINITY;
  for (int64_t j = lane; j < n; j += 32) mx = fmaxf(mx, p[j]);
  mx = warp_max(mx);
  double sum = 0;
  for (int64_t j = lane; j < n; j += 32) {
    const float e = expf((p[j] - mx) * scale);
    p[j] = e;
    sum += e;
  }
  sum = cuda::warp_sum(sum);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = lane; j < T; j += 32) p[j] = j < n ? p[j] * inv : 0.0f;
}

// ds rows [rows, T] (local row = zl·T + t, probs rows matching): dP in, scale · p (dp − Σ p dp)
// out over the causal window, zero above it (where dP was never written).
__global__ void softmax_grad_kernel(const float* probs, float* ds, int64_t rows, int64_t T,
                                    float scale) {
  const int64_t row = blockIdx.x * int64_t{kRowWarps} + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t n = row % T + 1;
  const float* p = probs + row * T;
  float* d = ds + row * T;
  double pdp = 0;
  for (int64_t j = lane; j < n; j += 32) pdp += double(p[j]) * d[j];
  const float c = static_cast<float>(cuda::warp_sum(pdp));
  for (int64_t j = lane; j < T; j += 32) d[j] = j < n ? scale * p[j] * (d[j] - c) : 0.0f;
}

void launch_rows(void (*kernel)(float*, int64_t, int64_t, float), float* m, int64_t rows, int64_t T,
                 float scale, const char* what) {
  cuda::launch(kernel, blocks_for(rows, kRowWarps), 32 * kRowWarps, 0, m, rows, T, scale);
  check_launch(what);
}

// ---- AttnRes mix -------------------------------------------------------------------------

constexpr int kMaxCands = 64;

int row_block(int64_t d) {  // threads of a one-block-per-row kernel: a multiple of 32
  return static_cast<int>(std::clamp<int64_t>((d + 31) / 32 * 32, 32, 256));
}

// out [rows, d]: one block per row; scores (v·w)/rms(v) per candidate, softmax, raw mix.
__global__ void attn_res_fwd_kernel(const float* const* cands, int n, int64_t d, const float* w,
                                    float eps, float* out) {
  __shared__ float score[kMaxCands], e[kMaxCands];
  const int64_t t = blockIdx.x;
  for (int i = 0; i < n; ++i) {
    const float* v = cands[i] + t * d;
    float ss = 0, dot = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      ss += v[j] * v[j];
      dot += v[j] * w[j];
    }
    ss = cuda::block_sum(ss);
    dot = cuda::block_sum(dot);
    if (threadIdx.x == 0) score[i] = dot / sqrtf(ss / static_cast<float>(d) + eps);
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = fmaxf(mx, score[i]);
  for (int i = threadIdx.x; i < n; i += blockDim.x) e[i] = expf(score[i] - mx);
  __syncthreads();
  float sum = 0;
  for (int i = 0; i < n; ++i) sum += e[i];
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float acc = 0;
    for (int i = 0; i < n; ++i) acc += e[i] * cands[i][t * d + j];
    out[t * d + j] = acc / sum;
  }
}

// One block per row, in double as the CPU backward: the per-candidate sums, then
// dcands[i] += p_i g + ds_i (ρ_i w − c_i v_i) and dw_rows[t] = Σ_i ds_i ρ_i v_i (when not null).
__global__ void attn_res_bwd_kernel(const float* const* cands, int n, int64_t d, const float* w,
                                    float eps, const float* dout, float* const* dcands,
                                    float* dw_rows) {
  __shared__ double rho[kMaxCands], dot[kMaxCands], p[kMaxCands], dp[kMaxCands];
  const int64_t t = blockIdx.x;
  const float* g = dout + t * d;
  for (int i = 0; i < n; ++i) {
    const float* v = cands[i] + t * d;
    double ss = 0, vw = 0, vg = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      ss += double(v[j]) * v[j];
      vw += double(v[j]) * w[j];
      vg += double(v[j]) * g[j];
    }
    ss = cuda::block_sum(ss);
    vw = cuda::block_sum(vw);
    vg = cuda::block_sum(vg);
    if (threadIdx.x == 0) {
      rho[i] = 1.0 / sqrt(ss / double(d) + eps);
      dot[i] = vw;
      dp[i] = vg;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // softmax, then p → ds and dot → c = (v·w) ρ³ / d in place
    double mx = -INFINITY, sum = 0, pdp = 0;
    for (int i = 0; i < n; ++i) mx = fmax(mx, p[i] = rho[i] * dot[i]);
    for (int i = 0; i < n; ++i) sum += (p[i] = exp(p[i] - mx));
    for (int i = 0; i < n; ++i) pdp += (p[i] /= sum) * dp[i];
    for (int i = 0; i < n; ++i) {
      dp[i] = p[i] * (dp[i] - pdp);
      dot[i] = dot[i] * rho[i] * rho[i] * rho[i] / double(d);
    }
  }
  __syncthreads();
  const double* ds = dp;
  const double* c = dot;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    double acc = 0;
    for (int i = 0; i < n; ++i) {
      const double v = cands[i][t * d + j];
      if (dcands[i] != nullptr)
        dcands[i][t * d + j] +=
            static_cast<float>(p[i] * g[j] + ds[i] * (rho[i] * w[j] - c[i] * v));
      acc += ds[i] * rho[i] * v;
    }
    if (dw_rows != nullptr) dw_rows[t * d + j] = static_cast<float>(acc);
  }
}

// ---- router ------------------------------------------------------------------------------

constexpr int kRouterWarps = 4;

// (v, e) comes before (v2, e2) in the selection order: higher biased score, then lower id.
__device__ inline bool before(float v, int e, float v2, int e2) {
  return v > v2 || (v == v2 && e < e2);
}

// One warp per token: round i picks the first expert after round i−1's pick in the selection
// order (a warp arg-min, so no taken flags), then the picks are ranked by id and weighed with
// the CPU's arithmetic (the sum in double, ascending id).
__global__ void router_fwd_kernel(const float* logits, const float* bias, RouterParams p,
                                  int64_t rows, int32_t* sel, float* weight) {
  extern __shared__ float router_smem[];
  const int E = static_cast<int>(p.n_expert), k = static_cast<int>(p.top_k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x * int64_t{kRouterWarps} + warp;
  if (t >= rows) return;                                 // the whole warp
  float* s = router_smem + int64_t{warp} * (E + 2 * k);  // s [E], picks [k], ascending [k]
  int* picks = reinterpret_cast<int*>(s + E);
  int* asc = picks + k;
  const float* lg = logits + t * E;
  for (int e = lane; e < E; e += 32) s[e] = 1.0f / (1.0f + expf(-lg[e]));
  __syncwarp();
  float pv = 0;
  int pe = -1;  // the previous pick (none yet)
  for (int i = 0; i < k; ++i) {
    float bv = 0;
    int be = -1;  // this lane's best so far (none yet)
    for (int e = lane; e < E; e += 32) {
      const float v = s[e] + bias[e];
      if ((pe < 0 || before(pv, pe, v, e)) && (be < 0 || before(v, e, bv, be))) bv = v, be = e;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oe = __shfl_xor_sync(0xffffffffu, be, o);
      if (oe >= 0 && (be < 0 || before(ov, oe, bv, be))) bv = ov, be = oe;
    }
    pv = bv, pe = be;  // the same in every lane
    if (lane == 0) picks[i] = be;
  }
  __syncwarp();
  for (int i = lane; i < k; i += 32) {
    int rank = 0;
    for (int j = 0; j < k; ++j) rank += picks[j] < picks[i];
    asc[rank] = picks[i];
  }
  __syncwarp();
  double sum = 0;
  if (lane == 0) {
    for (int i = 0; i < k; ++i) sum += s[asc[i]];
  }
  sum = __shfl_sync(0xffffffffu, sum, 0);
  const bool renorm = p.renormalize && k > 1;
  for (int i = lane; i < k; i += 32) {
    const float si = s[asc[i]];
    const double wv = renorm ? si / (sum + 1e-20) : si;
    sel[t * k + i] = asc[i];
    weight[t * k + i] = static_cast<float>(wv) * p.scale;
  }
}

// One thread per token, in double as the CPU backward (the k selected experts are distinct).
__global__ void router_bwd_kernel(const float* logits, const int32_t* sel, RouterParams p,
                                  int64_t rows, const float* dweight, float* dlogits) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= rows) return;
  const int64_t E = p.n_expert, k = p.top_k;
  const int32_t* st = sel + t * k;
  const float* dwt = dweight + t * k;
  auto score = [&](int64_t j) { return 1.0 / (1.0 + exp(-double(logits[t * E + st[j]]))); };
  double sum = 0, dws = 0;
  for (int64_t j = 0; j < k; ++j) {
    sum += score(j);
    dws += dwt[j] * score(j);
  }
  sum += 1e-20;
  const bool renorm = p.renormalize && k > 1;
  for (int64_t j = 0; j < k; ++j) {
    const double sj = score(j);
    const double ds = renorm ? p.scale * (dwt[j] / sum - dws / (sum * sum)) : p.scale * dwt[j];
    dlogits[t * E + st[j]] += static_cast<float>(ds * sj * (1.0 - sj));
  }
}

// ---- gathers and the experts' combine (one thread per element unless said) --------------

__global__ void gather_rows_kernel(const float* src, const int64_t* idx, int64_t n, int64_t width,
                                   float* dst) {
  const int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (e >= n * width) return;
  dst[e] = src[idx[e / width] * width + e % width];
}

// c [rows, width] += Σ_j weight[t·k+j] · y[inv[t·k+j]], j ascending.
__global__ void moe_combine_kernel(const float* y, const int64_t* inv, const float* weight,
                                   int64_t rows, int64_t k, int64_t width, float* c) {
  const int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (e >= rows * width) return;
  const int64_t t = e / width, col = e % width;
  float acc = c[e];
  for (int64_t j = 0; j < k; ++j) acc += weight[t * k + j] * y[inv[t * k + j] * width + col];
  c[e] = acc;
}

// dy[inv[ch]] += weight[ch] · dc[ch / k] over the n = rows·k choices ch (inv is one-to-one).
__global__ void moe_combine_dy_kernel(const int64_t* inv, const float* weight, int64_t n, int64_t k,
                                      int64_t width, const float* dc, float* dy) {
  const int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (e >= n * width) return;
  const int64_t ch = e / width, col = e % width;
  dy[inv[ch] * width + col] += weight[ch] * dc[ch / k * width + col];
}

// dweight[ch] += dc[ch / k] · y[inv[ch]]: one warp per choice, the dot in double.
__global__ void moe_combine_dw_kernel(const float* y, const int64_t* inv, int64_t n, int64_t k,
                                      int64_t width, const float* dc, float* dweight) {
  const int64_t ch = blockIdx.x * int64_t{kRowWarps} + threadIdx.x / 32;
  if (ch >= n) return;
  const int lane = threadIdx.x % 32;
  const float* g = dc + ch / k * width;
  const float* yr = y + inv[ch] * width;
  double acc = 0;
  for (int64_t col = lane; col < width; col += 32) acc += double(g[col]) * yr[col];
  acc = cuda::warp_sum(acc);
  if (lane == 0) dweight[ch] += static_cast<float>(acc);
}

// dsrc [rows, width] += Σ_j ddst[inv[t·k+j]], j ascending.
__global__ void gather_choices_bwd_kernel(const float* ddst, const int64_t* inv, int64_t rows,
                                          int64_t k, int64_t width, float* dsrc) {
  const int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (e >= rows * width) return;
  const int64_t t = e / width, col = e % width;
  float acc = dsrc[e];
  for (int64_t j = 0; j < k; ++j) acc += ddst[inv[t * k + j] * width + col];
  dsrc[e] = acc;
}

}  // namespace

// ---- attention ---------------------------------------------------------------------------

void mla_attention_fwd(const float* q, const float* k, const float* v, int64_t B, int64_t T,
                       int64_t H, int64_t Dq, int64_t Dv, float* probs, float* o) {
  if (B <= 0 || T <= 0 || H <= 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dq));  // as mla_expanded_f32.cpp
  const int64_t TT = T * T, qs = H * Dq, vs = H * Dv;            // row strides of q/k and v/o
  const Operand q_op{q, 0, T * qs, Dq, qs, 1};                   // [T, Dq]
  const Operand kt_op{k, 0, T * qs, Dq, 1, qs};                  // kᵀ [Dq, T]
  const Operand p_op{probs, 0, H * TT, TT, T, 1};                // [T, T]
  const Operand v_op{v, 0, T * vs, Dv, vs, 1};                   // [T, Dv]
  const Output s_out{probs, 0, H * TT, TT, T};
  const Output o_out{o, 0, T * vs, Dv, vs};
  const int64_t BH = B * H;
  for (int64_t z0 = 0; z0 < BH; z0 += kMaxBatch) {
    const int64_t nz = std::min(kMaxBatch, BH - z0);
    product(false, q_op, kt_op, s_out, T, T, Dq, H, z0, nz, kLowerOut, "mla_attention_fwd (qk)");
  }
  launch_rows(causal_softmax_kernel, probs, BH * T, T, scale, "mla_attention_fwd (softmax)");
  for (int64_t z0 = 0; z0 < BH; z0 += kMaxBatch) {
    const int64_t nz = std::min(kMaxBatch, BH - z0);
    product(false, p_op, v_op, o_out, T, Dv, T, H, z0, nz, kLowerA, "mla_attention_fwd (pv)");
  }
}

void mla_attention_bwd(const float* q, const float* k, const float* v, const float* probs,
                       int64_t B, int64_t T, int64_t H, int64_t Dq, int64_t Dv, const float* d_o,
                       float* dq, float* dk, float* dv) {
  if (B <= 0 || T <= 0 || H <= 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dq));
  const int64_t TT = T * T, qs = H * Dq, vs = H * Dv, BH = B * H;
  // dS of up to `group` (window, head) pairs at a time: bounded scratch whatever B·H.
  const int64_t group = std::clamp<int64_t>(kGradScratch / TT, 1, std::min(BH, kMaxBatch));
  cuda::Scratch ds_mem(static_cast<size_t>(group * TT) * sizeof(float));
  auto* ds = static_cast<float*>(ds_mem.get());
  const Operand q_op{q, 0, T * qs, Dq, qs, 1};      // [T, Dq]
  const Operand k_op{k, 0, T * qs, Dq, qs, 1};      // [T, Dq]
  const Operand vt_op{v, 0, T * vs, Dv, 1, vs};     // vᵀ [Dv, T]
  const Operand do_op{d_o, 0, T * vs, Dv, vs, 1};   // [T, Dv]
  const Operand pt_op{probs, 0, H * TT, TT, 1, T};  // Pᵀ [T, T]
  const Operand ds_op{ds, TT, 0, 0, T, 1};          // dS [T, T] of the group's entry zl
  const Operand dst_op{ds, TT, 0, 0, 1, T};         // dSᵀ
  const Output dp_out{ds, TT, 0, 0, T};
  const Output dq_out{dq, 0, T * qs, Dq, qs}, dk_out{dk, 0, T * qs, Dq, qs};
  const Output dv_out{dv, 0, T * vs, Dv, vs};
  for (int64_t z0 = 0; z0 < BH; z0 += group) {
    const int64_t nz = std::min(group, BH - z0);
    if (dv != nullptr)
      product(true, pt_op, do_op, dv_out, T, Dv, T, H, z0, nz, kUpperA, "mla_attention_bwd (dv)");
    if (dq == nullptr && dk == nullptr) continue;
    product(false, do_op, vt_op, dp_out, T, T, Dv, H, z0, nz, kLowerOut, "mla_attention_bwd (dp)");
    cuda::launch(softmax_grad_kernel, blocks_for(nz * T, kRowWarps), 32 * kRowWarps, 0,
                 probs + z0 * TT, ds, nz * T, T, scale);
    check_launch("mla_attention_bwd (ds)");
    if (dq != nullptr)
      product(true, ds_op, k_op, dq_out, T, Dq, T, H, z0, nz, kLowerA, "mla_attention_bwd (dq)");
    if (dk != nullptr)
      product(true, dst_op, q_op, dk_out, T, Dq, T, H, z0, nz, kUpperA, "mla_attention_bwd (dk)");
  }
}

// ---- AttnRes mix -------------------------------------------------------------------------

void attn_res_mix_fwd(const float* const* cands, int64_t n, int64_t rows, int64_t d, const float* w,
                      float eps, float* out) {
  check(n >= 1 && n <= kMaxCands, "attn_res_mix_fwd: ", n, " candidates (1 to ", kMaxCands, ")");
  if (rows <= 0 || d <= 0) return;
  std::vector<cuda::Scratch> keep;
  const float* const* dc = cuda::upload(cands, static_cast<size_t>(n), keep);
  cuda::launch(attn_res_fwd_kernel, static_cast<unsigned>(rows), row_block(d), 0, dc,
               static_cast<int>(n), d, w, eps, out);
  check_launch("attn_res_mix_fwd");
}

void attn_res_mix_bwd(const float* const* cands, int64_t n, int64_t rows, int64_t d, const float* w,
                      float eps, const float* dout, float* const* dcands, float* dw) {
  check(n >= 1 && n <= kMaxCands, "attn_res_mix_bwd: ", n, " candidates (1 to ", kMaxCands, ")");
  if (rows <= 0 || d <= 0) return;
  std::vector<cuda::Scratch> keep;
  const float* const* dc = cuda::upload(cands, static_cast<size_t>(n), keep);
  float* const* ddc = cuda::upload(dcands, static_cast<size_t>(n), keep);
  // dw's per-row terms [rows, d], summed over rows by colsum_add (a fixed order).
  cuda::Scratch dw_rows;
  if (dw != nullptr) dw_rows = cuda::Scratch(static_cast<size_t>(rows * d) * sizeof(float));
  auto* dwr = static_cast<float*>(dw_rows.get());
  cuda::launch(attn_res_bwd_kernel, static_cast<unsigned>(rows), row_block(d), 0, dc,
               static_cast<int>(n), d, w, eps, dout, ddc, dwr);
  check_launch("attn_res_mix_bwd");
  if (dw != nullptr) colsum_add(dwr, rows, d, dw);
}

// ---- router ------------------------------------------------------------------------------

void router_fwd(const float* logits, const float* bias, RouterParams p, int64_t rows, int32_t* sel,
                float* weight) {
  const size_t smem = static_cast<size_t>(kRouterWarps) * (p.n_expert + 2 * p.top_k) * 4;
  check(p.top_k >= 1 && p.top_k <= p.n_expert && smem <= 48 * 1024, "router_fwd: ", p.n_expert,
        " experts, top-", p.top_k);
  if (rows <= 0) return;
  cuda::launch(router_fwd_kernel, blocks_for(rows, kRouterWarps), 32 * kRouterWarps, smem, logits,
               bias, p, rows, sel, weight);
  check_launch("router_fwd");
}

void router_bwd(const float* logits, const int32_t* sel, RouterParams p, int64_t rows,
                const float* dweight, float* dlogits) {
  if (rows <= 0 || p.top_k <= 0) return;
  cuda::launch(router_bwd_kernel, blocks_for(rows, kThreads), kThreads, 0, logits, sel, p, rows,
               dweight, dlogits);
  check_launch("router_bwd");
}

// ---- gathers and combine -----------------------------------------------------------------

void gather_rows_fwd(const float* src, const int64_t* rows_idx, int64_t n, int64_t width,
                     float* dst) {
  if (n <= 0 || width <= 0) return;
  cuda::launch(gather_rows_kernel, blocks_for(n * width, kThreads), kThreads, 0, src, rows_idx, n,
               width, dst);
  check_launch("gather_rows_fwd");
}

void moe_combine_fwd(const float* y, const int64_t* inv, const float* weight, int64_t rows,
                     int64_t k, int64_t width, float* c) {
  if (rows <= 0 || k <= 0 || width <= 0) return;
  cuda::launch(moe_combine_kernel, blocks_for(rows * width, kThreads), kThreads, 0, y, inv, weight,
               rows, k, width, c);
  check_launch("moe_combine_fwd");
}

void moe_combine_bwd(const float* y, const int64_t* inv, const float* weight, int64_t rows,
                     int64_t k, int64_t width, const float* dc, float* dy, float* dweight) {
  if (rows <= 0 || k <= 0 || width <= 0) return;
  const int64_t n = rows * k;
  if (dy != nullptr) {
    cuda::launch(moe_combine_dy_kernel, blocks_for(n * width, kThreads), kThreads, 0, inv, weight,
                 n, k, width, dc, dy);
    check_launch("moe_combine_bwd (dy)");
  }
  if (dweight != nullptr) {
    cuda::launch(moe_combine_dw_kernel, blocks_for(n, kRowWarps), 32 * kRowWarps, 0, y, inv, n, k,
                 width, dc, dweight);
    check_launch("moe_combine_bwd (dweight)");
  }
}

void gather_choices_bwd(const float* ddst, const int64_t* inv, int64_t rows, int64_t k,
                        int64_t width, float* dsrc) {
  if (rows <= 0 || k <= 0 || width <= 0) return;
  cuda::launch(gather_choices_bwd_kernel, blocks_for(rows * width, kThreads), kThreads, 0, ddst,
               inv, rows, k, width, dsrc);
  check_launch("gather_choices_bwd");
}

}  // namespace k3::train::gpu
