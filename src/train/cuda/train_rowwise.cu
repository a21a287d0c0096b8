// The row-wise training kernels of train_ops.h: the norms, the element-wise ops, SiTU-GLU, the
// KDA gate, cross-entropy and the embedding, forward and backward, in fp32 on the stream.
// A row op runs one block per row with the fixed-order block sums of reduce.cuh. A gradient
// summed over rows (a norm's weight, the gate's biases) is written row by row to scratch and
// summed by colsum_add; the embedding backward adds its rows in row order: no float atomics,
// so every run gives the same bits.
#include <algorithm>
#include <cmath>

#include "backend/cuda/reduce.cuh"
#include "backend/cuda/runtime.cuh"
#include "train/cuda/train_ops.h"

namespace k3::train::gpu {
namespace {

using cuda::blocks_for;
using cuda::check_launch;

constexpr int kThreads = 256;                       // element-wise kernels
constexpr int kMaxRowThreads = 1024;                // row kernels
constexpr int64_t kChunkFloats = int64_t{1} << 24;  // per-row gradient scratch: 64 MiB at most

__device__ inline float sigmoid_dev(float v) { return 1.0f / (1.0f + expf(-v)); }

// ---- element-wise: one thread per value ----

template <typename F>
__global__ void map_kernel(int64_t n, F f) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) f(i);
}

template <typename F>
void launch_map(int64_t n, const char* op, F f) {
  if (n <= 0) return;
  cuda::launch(map_kernel<F>, blocks_for(n, kThreads), kThreads, 0, n, f);
  check_launch(op);
}

// ---- row kernels: one block per row, every thread strides over the row ----

// Threads of a row kernel's block: one per value of the row, in whole warps (the reductions
// shuffle full warps), 32 to 1024.
int row_threads(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + 31) / 32 * 32, 32, kMaxRowThreads));
}

// Rows per pass of a gradient summed over rows, so that its per-row terms [chunk, n] stay
// within kChunkFloats (65536 rows of 8192 would be 2 GiB); the passes add to it in order.
int64_t chunk_rows(int64_t rows, int64_t n) {
  return std::clamp<int64_t>(kChunkFloats / n, 1, rows);
}

// The block's maximum, in every thread (blockDim.x a multiple of 32).
__device__ float block_max(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // part[] may still be read by a previous call
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float m = part[0];
  for (int i = 1; i < static_cast<int>(blockDim.x / 32); ++i) m = fmaxf(m, part[i]);
  return m;
}

// Σ x² of one row xr [n], in every thread.
__device__ float row_sum_sq(const float* xr, int64_t n) {
  float ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
  return cuda::block_sum(ss);
}

enum NormMode { kRms, kGatedRms, kL2 };

// x, z, y [rows, n], w [n]; y may alias x (each value is read and written by one thread).
template <int kMode>
__global__ void __launch_bounds__(kMaxRowThreads)
    norm_fwd_kernel(const float* x, const float* z, const float* w, int64_t n, float eps,
                    float* y) {
  const int64_t off = blockIdx.x * n;
  const float ss = row_sum_sq(x + off, n);
  const float s = 1.0f / sqrtf(kMode == kL2 ? ss + eps : ss / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[off + i];
    if (kMode == kRms) y[off + i] = w[i] * (v * s);
    if (kMode == kGatedRms) y[off + i] = v * s * w[i] * sigmoid_dev(z[off + i]);
    if (kMode == kL2) y[off + i] = v * s;
  }
}

// The RMS norm backward of norm_bwd.cpp for one row per block, with gy = w ⊙ dy (⊙ σ(z)):
//   dx += r·gy − r³/n · (Σ gy ⊙ x) · x,   dz += dy w (x r) σ'(z),   dw_rows = dy (x r) (σ(z)).
// dw_rows [rows, n] gets this row's terms of dw (colsum_add sums them); null pointers skip.
template <bool kGated>
__global__ void __launch_bounds__(kMaxRowThreads)
    rms_bwd_kernel(const float* x, const float* z, const float* w, int64_t n, float eps,
                   const float* dy, float* dx, float* dz, float* dw_rows) {
  const int64_t off = blockIdx.x * n;
  auto gate = [&](int64_t i) { return kGated ? sigmoid_dev(z[off + i]) : 1.0f; };
  float ss = 0, dot = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[off + i];
    ss += v * v;
    dot += w[i] * dy[off + i] * gate(i) * v;
  }
  ss = cuda::block_sum(ss);
  dot = cuda::block_sum(dot);
  const float r = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  const float c = r * r * r / static_cast<float>(n) * dot;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[off + i], d = dy[off + i], s = gate(i), normed = v * r;
    if (dx != nullptr) dx[off + i] += r * (w[i] * d * s) - c * v;
    if (kGated && dz != nullptr) dz[off + i] += d * w[i] * normed * s * (1.0f - s);
    if (dw_rows != nullptr) dw_rows[off + i] = d * normed * s;
  }
}

// dx [rows, n] += r·dy − r³ (Σ dy ⊙ x) · x with r = (Σ x² + eps)^-½.
__global__ void __launch_bounds__(kMaxRowThreads)
    l2_bwd_kernel(const float* x, int64_t n, float eps, const float* dy, float* dx) {
  const int64_t off = blockIdx.x * n;
  float ss = 0, dot = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[off + i];
    ss += v * v;
    dot += dy[off + i] * v;
  }
  ss = cuda::block_sum(ss);
  dot = cuda::block_sum(dot);
  const float r = 1.0f / sqrtf(ss + eps), c = r * r * r * dot;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    dx[off + i] += r * dy[off + i] - c * x[off + i];
}

template <int kMode>
void launch_norm_fwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                     float eps, float* y, const char* op) {
  if (rows <= 0 || n <= 0) return;
  cuda::launch(norm_fwd_kernel<kMode>, static_cast<unsigned>(rows), row_threads(n), 0, x, z, w, n,
               eps, y);
  check_launch(op);
}

// The (gated) RMS norm backward: dw by chunks of rows through scratch and colsum_add.
template <bool kGated>
void launch_rms_bwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                    float eps, const float* dy, float* dx, float* dz, float* dw, const char* op) {
  if (rows <= 0 || n <= 0 || (dx == nullptr && dz == nullptr && dw == nullptr)) return;
  const int64_t chunk = dw != nullptr ? chunk_rows(rows, n) : rows;
  cuda::Scratch tmp;  // [chunk, n]: each row's terms of dw
  if (dw != nullptr) tmp = cuda::Scratch(static_cast<size_t>(chunk * n) * sizeof(float));
  float* dw_rows = static_cast<float*>(tmp.get());
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t m = std::min(chunk, rows - r0), off = r0 * n;
    cuda::launch(rms_bwd_kernel<kGated>, static_cast<unsigned>(m), row_threads(n), 0, x + off,
                 kGated ? z + off : nullptr, w, n, eps, dy + off,
                 dx != nullptr ? dx + off : nullptr, dz != nullptr ? dz + off : nullptr, dw_rows);
    check_launch(op);
    if (dw != nullptr) colsum_add(dw_rows, m, n, dw);
  }
}

// ---- KDA gate backward: one warp per (row, head), lanes striding over the K channels ----

constexpr int kGateWarps = kThreads / 32;

// x = e^{A_log[h]} (f + dt_bias[h]), dx = dg · L σ(x)(1 − σ(x)): df += dx e^A, and the row's
// terms ddt_rows [rows, H, K] = dx e^A and dA_rows [rows, H] = Σ_i dx x (null: skipped).
__global__ void kda_gate_bwd_kernel(const float* f, const float* A_log, const float* dt_bias,
                                    int64_t pairs, int64_t H, int64_t K, float lower_bound,
                                    const float* dg, float* df, float* ddt_rows, float* dA_rows) {
  const int64_t p = blockIdx.x * int64_t{kGateWarps} + threadIdx.x / 32;  // row · H + h
  if (p >= pairs) return;  // the whole warp: warp_sum below needs all 32 lanes
  const int64_t h = p % H;
  const int lane = threadIdx.x % 32;
  const float a = expf(A_log[h]);
  float dA = 0;
  for (int64_t i = lane; i < K; i += 32) {
    const int64_t j = p * K + i;
    const float x = a * (f[j] + dt_bias[h * K + i]), sg = sigmoid_dev(x);
    const float dx = dg[j] * lower_bound * sg * (1.0f - sg);
    if (df != nullptr) df[j] += dx * a;
    if (ddt_rows != nullptr) ddt_rows[j] = dx * a;
    dA += dx * x;
  }
  dA = cuda::warp_sum(dA);
  if (dA_rows != nullptr && lane == 0) dA_rows[p] = dA;
}

// ---- cross-entropy: one block per row ----

// The row's maximum mx and Σ_v e^{x_v − mx} of x [V], in every thread.
__device__ void softmax_stats(const float* x, int64_t V, float& mx, float& sum) {
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, x[i]);
  mx = block_max(m);
  float s = 0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) s += expf(x[i] - mx);
  sum = cuda::block_sum(s);
}

// loss[r] = (mx − x[target]) + log Σ e^{x − mx}: the difference first, exact when the target
// is near the maximum, so the small loss of a confident row keeps its digits. A target outside
// [0, V) (the CPU op throws) gives NaN rather than a read out of bounds.
__global__ void __launch_bounds__(kMaxRowThreads)
    ce_fwd_kernel(const float* logits, const int64_t* targets, int64_t V, float* loss) {
  const int64_t r = blockIdx.x;
  const float* x = logits + r * V;
  float mx, sum;
  softmax_stats(x, V, mx, sum);
  if (threadIdx.x != 0) return;
  const int64_t t = targets[r];
  loss[r] = t >= 0 && t < V ? (mx - x[t]) + logf(sum) : NAN;
}

// dlogits[r] += dloss[r] · softmax(x) then −dloss[r] at the target (the CPU's two roundings).
// A target outside [0, V) makes the row NaN, like the loss.
__global__ void __launch_bounds__(kMaxRowThreads)
    ce_bwd_kernel(const float* logits, const int64_t* targets, int64_t V, const float* dloss,
                  float* dlogits) {
  const int64_t r = blockIdx.x;
  const float* x = logits + r * V;
  float mx, sum;
  softmax_stats(x, V, mx, sum);
  const int64_t t = targets[r];
  const float dl = dloss[r], scale = dl / sum, bad = t >= 0 && t < V ? 0.0f : NAN;
  float* d = dlogits + r * V;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    float v = d[i] + scale * expf(x[i] - mx);
    if (i == t) v -= dl;
    d[i] = v + bad;
  }
}

// ---- embedding backward: thread u owns column j = u mod d of the vocabulary span
// [v0, v0 + span), v0 = (u / d) · span, and walks every row in order adding those whose id
// falls in its span: each dtable value is only ever touched by one thread, in row order (the
// CPU's exact sums). The block stages the ids in shared memory a tile at a time. ----

constexpr int kEmbedTile = 1024;                   // ids per shared-memory tile
constexpr int64_t kEmbedUnits = int64_t{1} << 16;  // (span, column) threads to aim for

__global__ void embed_bwd_kernel(const int64_t* ids, int64_t rows, int64_t d, int64_t span,
                                 int64_t units, const float* dout, float* dtable) {
  __shared__ int64_t tile[kEmbedTile];
  const int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t j = u % d, v0 = u / d * span;
  for (int64_t r0 = 0; r0 < rows; r0 += kEmbedTile) {
    const int64_t m = std::min<int64_t>(kEmbedTile, rows - r0);
    __syncthreads();  // the previous tile is read
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) tile[k] = ids[r0 + k];
    __syncthreads();
    if (u >= units) continue;  // still loads and syncs with the block
    for (int64_t k = 0; k < m; ++k) {
      const int64_t v = tile[k];
      // One unsigned compare for v0 <= v < v0 + span (ids outside [0, vocab) are dropped).
      if (static_cast<uint64_t>(v - v0) < static_cast<uint64_t>(span)) {
        dtable[v * d + j] += dout[(r0 + k) * d + j];
      }
    }
  }
}

}  // namespace

// ---- norms ----

void rms_norm_fwd(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y) {
  launch_norm_fwd<kRms>(x, nullptr, rows, n, w, eps, y, "rms_norm_fwd");
}

void rms_norm_bwd(const float* x, int64_t rows, int64_t n, const float* w, float eps,
                  const float* dy, float* dx, float* dw) {
  launch_rms_bwd<false>(x, nullptr, rows, n, w, eps, dy, dx, nullptr, dw, "rms_norm_bwd");
}

void gated_rms_norm_fwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, float* y) {
  launch_norm_fwd<kGatedRms>(x, z, rows, n, w, eps, y, "gated_rms_norm_fwd");
}

void gated_rms_norm_bwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, const float* dy, float* dx, float* dz, float* dw) {
  launch_rms_bwd<true>(x, z, rows, n, w, eps, dy, dx, dz, dw, "gated_rms_norm_bwd");
}

void l2_norm_fwd(const float* x, int64_t rows, int64_t n, float eps, float* y) {
  launch_norm_fwd<kL2>(x, nullptr, rows, n, nullptr, eps, y, "l2_norm_fwd");
}

void l2_norm_bwd(const float* x, int64_t rows, int64_t n, float eps, const float* dy, float* dx) {
  if (rows <= 0 || n <= 0 || dx == nullptr) return;
  cuda::launch(l2_bwd_kernel, static_cast<unsigned>(rows), row_threads(n), 0, x, n, eps, dy, dx);
  check_launch("l2_norm_bwd");
}

// ---- element-wise ----

void sigmoid_fwd(const float* x, int64_t n, float* y) {
  launch_map(n, "sigmoid_fwd", [=] __device__(int64_t i) { y[i] = sigmoid_dev(x[i]); });
}

void sigmoid_bwd(const float* x, int64_t n, const float* dy, float* dx) {
  if (dx == nullptr) return;
  launch_map(n, "sigmoid_bwd", [=] __device__(int64_t i) {  // σ' = σ (1 − σ)
    const float s = sigmoid_dev(x[i]);
    dx[i] += dy[i] * s * (1.0f - s);
  });
}

void scale_fwd(const float* x, int64_t n, float s, float* y) {
  launch_map(n, "scale_fwd", [=] __device__(int64_t i) { y[i] = x[i] * s; });
}

void add_scaled(const float* x, int64_t n, float s, float* y) {
  launch_map(n, "add_scaled", [=] __device__(int64_t i) { y[i] += x[i] * s; });
}

void add_fwd(const float* a, const float* b, int64_t n, float* y) {
  launch_map(n, "add_fwd", [=] __device__(int64_t i) { y[i] = a[i] + b[i]; });
}

void mul_sigmoid_fwd(const float* x, const float* gate, int64_t n, float* y) {
  launch_map(n, "mul_sigmoid_fwd",
             [=] __device__(int64_t i) { y[i] = x[i] * sigmoid_dev(gate[i]); });
}

void mul_sigmoid_bwd(const float* x, const float* gate, int64_t n, const float* dy, float* dx,
                     float* dgate) {
  if (dx == nullptr && dgate == nullptr) return;
  launch_map(n, "mul_sigmoid_bwd", [=] __device__(int64_t i) {  // y = x σ(g)
    const float s = sigmoid_dev(gate[i]);
    if (dx != nullptr) dx[i] += dy[i] * s;
    if (dgate != nullptr) dgate[i] += dy[i] * x[i] * s * (1.0f - s);
  });
}

// ---- SiTU-GLU: φ(a, b) = G(a) U(b), G = β₁ tanh(a/β₁) σ(a), U = β₂ tanh(b/β₂) ----

void situ_glu_fwd(const float* gate, const float* up, int64_t n, SituParams p, float* out) {
  const float b1 = p.beta, b2 = p.linear_beta, inv_b1 = 1.0f / b1, inv_b2 = 1.0f / b2;
  launch_map(n, "situ_glu_fwd", [=] __device__(int64_t i) {
    const float a = gate[i], b = up[i];
    out[i] = b1 * tanhf(a * inv_b1) * sigmoid_dev(a) * (b2 * tanhf(b * inv_b2));
  });
}

void situ_glu_bwd(const float* gate, const float* up, int64_t n, SituParams p, const float* dout,
                  float* dgate, float* dup) {
  if (dgate == nullptr && dup == nullptr) return;
  const float b1 = p.beta, b2 = p.linear_beta, inv_b1 = 1.0f / b1, inv_b2 = 1.0f / b2;
  // G' = (1 − tanh²(a/β₁)) σ(a) + β₁ tanh(a/β₁) σ(a)(1 − σ(a)),  U' = 1 − tanh²(b/β₂).
  launch_map(n, "situ_glu_bwd", [=] __device__(int64_t i) {
    const float a = gate[i], b = up[i];
    const float ta = tanhf(a * inv_b1), tb = tanhf(b * inv_b2), sg = sigmoid_dev(a);
    const float G = b1 * ta * sg, U = b2 * tb;
    const float dG = (1.0f - ta * ta) * sg + b1 * ta * sg * (1.0f - sg);
    if (dgate != nullptr) dgate[i] += dout[i] * dG * U;
    if (dup != nullptr) dup[i] += dout[i] * G * (1.0f - tb * tb);
  });
}

// ---- KDA gate: g = L · σ(e^{A_log[h]} (f + dt_bias[h])) over f, g [rows, H, K] ----

void kda_gate_fwd(const float* f, const float* A_log, const float* dt_bias, int64_t rows, int64_t H,
                  int64_t K, float lower_bound, float* g) {
  const int64_t HK = H * K;
  launch_map(rows * HK, "kda_gate_fwd", [=] __device__(int64_t i) {
    const int64_t hk = i % HK, h = hk / K;
    g[i] = lower_bound * sigmoid_dev(expf(A_log[h]) * (f[i] + dt_bias[hk]));
  });
}

void kda_gate_bwd(const float* f, const float* A_log, const float* dt_bias, int64_t rows, int64_t H,
                  int64_t K, float lower_bound, const float* dg, float* df, float* dA_log,
                  float* ddt_bias) {
  const int64_t HK = H * K;
  if (rows <= 0 || HK <= 0 || (df == nullptr && dA_log == nullptr && ddt_bias == nullptr)) return;
  const bool sums = dA_log != nullptr || ddt_bias != nullptr;
  const int64_t chunk = sums ? chunk_rows(rows, HK) : rows;
  cuda::Scratch tdt, tA;  // [chunk, H, K] and [chunk, H]: each row's terms
  if (ddt_bias != nullptr) tdt = cuda::Scratch(static_cast<size_t>(chunk * HK) * sizeof(float));
  if (dA_log != nullptr) tA = cuda::Scratch(static_cast<size_t>(chunk * H) * sizeof(float));
  float* ddt_rows = static_cast<float*>(tdt.get());
  float* dA_rows = static_cast<float*>(tA.get());
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t m = std::min(chunk, rows - r0), off = r0 * HK;
    cuda::launch(kda_gate_bwd_kernel, blocks_for(m * H, kGateWarps), kThreads, 0, f + off, A_log,
                 dt_bias, m * H, H, K, lower_bound, dg + off, df != nullptr ? df + off : nullptr,
                 ddt_rows, dA_rows);
    check_launch("kda_gate_bwd");
    if (ddt_bias != nullptr) colsum_add(ddt_rows, m, HK, ddt_bias);
    if (dA_log != nullptr) colsum_add(dA_rows, m, H, dA_log);
  }
}

// ---- cross-entropy ----

void cross_entropy_fwd(const float* logits, const int64_t* targets, int64_t rows, int64_t V,
                       float* loss) {
  if (rows <= 0 || V <= 0) return;
  cuda::launch(ce_fwd_kernel, static_cast<unsigned>(rows), row_threads(V), 0, logits, targets, V,
               loss);
  check_launch("cross_entropy_fwd");
}

void cross_entropy_bwd(const float* logits, const int64_t* targets, int64_t rows, int64_t V,
                       const float* dloss, float* dlogits) {
  if (rows <= 0 || V <= 0 || dlogits == nullptr) return;
  cuda::launch(ce_bwd_kernel, static_cast<unsigned>(rows), row_threads(V), 0, logits, targets, V,
               dloss, dlogits);
  check_launch("cross_entropy_bwd");
}

// ---- embedding ----

void embed_fwd(const float* table, const int64_t* ids, int64_t rows, int64_t d, float* out) {
  launch_map(rows * d, "embed_fwd",
             [=] __device__(int64_t i) { out[i] = table[ids[i / d] * d + i % d]; });
}

void embed_bwd(const int64_t* ids, int64_t rows, int64_t d, int64_t vocab, const float* dout,
               float* dtable) {
  if (rows <= 0 || d <= 0 || vocab <= 0 || dtable == nullptr) return;
  // Enough (span, column) threads to fill the device; narrower spans cost more id scans.
  const int64_t spans = std::clamp<int64_t>(kEmbedUnits / d, 1, vocab);
  const int64_t span = (vocab + spans - 1) / spans;
  const int64_t units = (vocab + span - 1) / span * d;
  cuda::launch(embed_bwd_kernel, blocks_for(units, kThreads), kThreads, 0, ids, rows, d, span,
               units, dout, dtable);
  check_launch("embed_bwd");
}

}  // namespace k3::train::gpu
