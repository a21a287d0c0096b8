// Element-wise, norm, gather/scatter, copy, gate, conv and AttnRes launchers: correct simple
// kernels (one thread per element, or one block per row with a block reduction in fp32/double
// where the CPU version sums in double).
#include <algorithm>
#include <vector>

#include "backend/cuda/launchers.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/runtime.cuh"

namespace k3 {
namespace {

using cuda::Args;
using cuda::blocks_for;
using cuda::check_launch;
using cuda::stream;

constexpr int kThreads = 256;

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

__device__ inline float sigmoidf_(float v) { return 1.0f / (1.0f + expf(-v)); }

}  // namespace

void sigmoid_cuda(const float* x, int64_t n, float* y) {
  Args a;
  const float* dx = a.in(x, n);
  float* dy = a.out(y, n);
  launch_map(n, "sigmoid", [=] __device__(int64_t i) { dy[i] = sigmoidf_(dx[i]); });
}

void scale_cuda(const float* x, int64_t n, float s, float* y) {
  Args a;
  const float* dx = a.in(x, n);
  float* dy = a.out(y, n);
  launch_map(n, "scale", [=] __device__(int64_t i) { dy[i] = dx[i] * s; });
}

void add_cuda(const float* x, const float* b, int64_t n, float* y) {
  Args a;
  const float* dx = a.in(x, n);
  const float* db = a.in(b, n);
  float* dy = a.out(y, n);
  launch_map(n, "add", [=] __device__(int64_t i) { dy[i] = dx[i] + db[i]; });
}

void mul_sigmoid_cuda(const float* x, const float* gate, int64_t n, float* y) {
  Args a;
  const float* dx = a.in(x, n);
  const float* dg = a.in(gate, n);
  float* dy = a.out(y, n);
  launch_map(n, "mul_sigmoid", [=] __device__(int64_t i) { dy[i] = dx[i] * sigmoidf_(dg[i]); });
}

void situ_glu_cuda(const float* gate, const float* up, int64_t n, SituParams p, float* out) {
  Args a;
  const float* dg = a.in(gate, n);
  const float* du = a.in(up, n);
  float* dy = a.out(out, n);
  const float b1 = p.beta, b2 = p.linear_beta, inv1 = 1.0f / p.beta, inv2 = 1.0f / p.linear_beta;
  launch_map(n, "situ_glu", [=] __device__(int64_t i) {
    const float g = dg[i], u = du[i];
    dy[i] = b1 * tanhf(g * inv1) / (1.0f + expf(-g)) * (b2 * tanhf(u * inv2));
  });
}

void fill_cuda(float* y, int64_t n, float value) {
  Args a;
  float* dy = a.out(y, n);
  launch_map(n, "fill", [=] __device__(int64_t i) { dy[i] = value; });
}

void kda_gate_cuda(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s,
                   float* g) {
  Args a;
  const int64_t n = s.T * s.H * s.K, H = s.H, K = s.K;
  const float* df = a.in(f, n);
  const float* dA = a.in(A_log, H);
  const float* db = a.in(dt_bias, H * K);
  float* dg = a.out(g, n);
  const float L = s.lower_bound;
  launch_map(n, "kda_gate", [=] __device__(int64_t i) {
    const int64_t hk = i % (H * K), h = hk / K;
    dg[i] = L * sigmoidf_(expf(dA[h]) * (df[i] + db[hk]));
  });
}

void copy_cuda(const float* src, CopyShape s, float* dst) {
  Args a;
  const int64_t n = s.shape[0] * s.shape[1] * s.shape[2] * s.shape[3];
  if (n == 0) return;
  // Extent of each side in elements (for staging): the last element's offset + 1.
  int64_t src_n = 1, dst_n = 1;
  for (int d = 0; d < 4; ++d) {
    src_n += (s.shape[d] - 1) * s.src_stride[d];
    dst_n += (s.shape[d] - 1) * s.dst_stride[d];
  }
  const float* ds = a.in(src, src_n);
  float* dd = a.inout(dst, dst_n);  // strided: elements between rows are kept
  launch_map(n, "copy", [=] __device__(int64_t i) {
    int64_t rem = i, so = 0, doff = 0;
    for (int d = 3; d >= 0; --d) {
      const int64_t c = rem % s.shape[d];
      rem /= s.shape[d];
      so += c * s.src_stride[d];
      doff += c * s.dst_stride[d];
    }
    dd[doff] = ds[so];
  });
}

void scatter_rows_cuda(const float* src, int64_t n, int64_t width, float* const* dst_rows) {
  if (n == 0 || width == 0) return;
  Args a;
  const float* ds = a.in(src, n * width);
  std::vector<float*> dev(dst_rows, dst_rows + n);
  for (float*& p : dev) p = a.out(p, width);
  float* const* drows = a.host_array(dev.data(), dev.size());
  launch_map(n * width, "scatter_rows",
             [=] __device__(int64_t i) { drows[i / width][i % width] = ds[i]; });
}

namespace {
int64_t max_index_plus_one(const int64_t* v, int64_t n, int64_t div) {
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, v[i] / div + 1);
  return m;
}
}  // namespace

void gather_rows_cuda(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  if (n == 0 || width == 0) return;
  Args a;
  const float* ds = a.in(src, max_index_plus_one(rows, n, 1) * width);
  const int64_t* dr = a.host_array(rows, n);
  float* dd = a.out(dst, n * width);
  launch_map(n * width, "gather_rows",
             [=] __device__(int64_t i) { dd[i] = ds[dr[i / width] * width + i % width]; });
}

void gather_choice_rows_cuda(const float* src, const int64_t* choice, int64_t n, int64_t k,
                             int64_t width, float* dst) {
  if (n == 0 || width == 0) return;
  Args a;
  const float* ds = a.in(src, max_index_plus_one(choice, n, k) * width);
  const int64_t* dc = a.host_array(choice, n);
  float* dd = a.out(dst, n * width);
  launch_map(n * width, "gather_choice_rows",
             [=] __device__(int64_t i) { dd[i] = ds[dc[i / width] / k * width + i % width]; });
}

void moe_scatter_add_cuda(const float* y, const int64_t* choice, const float* weight, int64_t n,
                          int64_t k, int64_t width, float* c) {
  if (n == 0 || width == 0) return;
  Args a;
  const int64_t T = max_index_plus_one(choice, n, k);
  const float* dy = a.in(y, n * width);
  const float* dw = a.in(weight, T * k);
  const int64_t* dc = a.host_array(choice, n);
  float* dcomb = a.inout(c, T * width);
  // One thread per column: the rows are added in choice order (each choice is a distinct
  // token within one expert, but keep the CPU's order for identical rounding).
  launch_map(width, "moe_scatter_add", [=] __device__(int64_t j) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t ch = dc[i];
      float* row = dcomb + ch / k * width;
      row[j] += dw[ch] * dy[i * width + j];
    }
  });
}

void embed_cuda(const Mat& table, const int64_t* ids, int64_t T, float* out) {
  if (T == 0) return;
  Args a;
  const int64_t d = table.cols, V = table.rows;
  const int64_t* di = a.host_array(ids, T);
  float* dout = a.out(out, T * d);
  if (table.format == MatFormat::bf16) {
    const uint16_t* w = a.in(static_cast<const uint16_t*>(table.data), V * d);
    launch_map(T * d, "embed", [=] __device__(int64_t i) {
      const uint32_t bits = uint32_t{w[di[i / d] * d + i % d]} << 16;
      dout[i] = __uint_as_float(bits);
    });
  } else {
    check(table.format == MatFormat::f32, "embed (cuda): BF16 or F32 tables only");
    const float* w = a.in(static_cast<const float*>(table.data), V * d);
    launch_map(T * d, "embed", [=] __device__(int64_t i) { dout[i] = w[di[i / d] * d + i % d]; });
  }
}

// ---- row norms: one block per row, sized to the row (a decode step has one row of 7168: a
// fixed 256 threads left it latency-bound at 18 µs), 16-byte loads where the row allows ----

namespace {

__device__ inline double sq4(float4 v) {
  return double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z + double(v.w) * v.w;
}

template <int kMode, bool kVec>  // kMode: 0 rms, 1 gated rms, 2 l2
__global__ void norm_kernel(const float* x, const float* z, const float* w, int64_t n, float eps,
                            float* y) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * n;
  double ss = 0;
  if (kVec) {
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      ss += sq4(reinterpret_cast<const float4*>(xr)[i]);
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += double(xr[i]) * xr[i];
  }
  ss = cuda::block_sum(ss);
  float s;
  if (kMode == 2) {
    s = static_cast<float>(1.0 / sqrt(ss + eps));
  } else {
    s = static_cast<float>(1.0 / sqrt(ss / double(n) + eps));
  }
  float* yr = y + r * n;
  auto one = [&](int64_t i, float v) {
    if (kMode == 0) return w[i] * (v * s);
    if (kMode == 1) return v * s * w[i] * sigmoidf_(z[r * n + i]);
    return v * s;
  };
  if (kVec) {
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      const float4 v = reinterpret_cast<const float4*>(xr)[i];
      reinterpret_cast<float4*>(yr)[i] = make_float4(one(4 * i, v.x), one(4 * i + 1, v.y),
                                                     one(4 * i + 2, v.z), one(4 * i + 3, v.w));
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = one(i, xr[i]);
  }
}

bool al16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Threads of a row kernel's block: one per load of the row (float4 loads when vec), in whole
// warps, 32 to 1024. The norm and AttnRes kernels share it: attn_res_norm equals the kernels
// it fuses bit for bit only at the same block size.
int row_threads(int64_t n, bool vec) {
  const int64_t loads = vec ? n / 4 : n;
  return static_cast<int>(std::clamp<int64_t>((loads + 31) / 32 * 32, 32, 1024));
}

template <int kMode>
void launch_norm(const float* x, const float* z, const float* w, int64_t rows, int64_t n, float eps,
                 float* y, const char* op) {
  const bool vec =
      n % 4 == 0 && al16(x) && al16(y) && (w == nullptr || al16(w)) && (z == nullptr || al16(z));
  const int threads = row_threads(n, vec);
  if (vec) {
    cuda::launch(norm_kernel<kMode, true>, rows, threads, 0, x, z, w, n, eps, y);
  } else {
    cuda::launch(norm_kernel<kMode, false>, rows, threads, 0, x, z, w, n, eps, y);
  }
  check_launch(op);
}

}  // namespace

void rms_norm_cuda(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y) {
  if (rows == 0) return;
  Args a;
  const float* dx = a.in(x, rows * n);
  const float* dw = a.in(w, n);
  float* dy = a.out(y, rows * n);
  launch_norm<0>(dx, nullptr, dw, rows, n, eps, dy, "rms_norm");
}

void gated_rms_norm_cuda(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                         float eps, float* y) {
  if (rows == 0) return;
  Args a;
  const float* dx = a.in(x, rows * n);
  const float* dz = a.in(z, rows * n);
  const float* dw = a.in(w, n);
  float* dy = a.out(y, rows * n);
  launch_norm<1>(dx, dz, dw, rows, n, eps, dy, "gated_rms_norm");
}

void l2_norm_cuda(const float* x, int64_t rows, int64_t n, float eps, float* y) {
  if (rows == 0) return;
  Args a;
  const float* dx = a.in(x, rows * n);
  float* dy = a.out(y, rows * n);
  launch_norm<2>(dx, nullptr, nullptr, rows, n, eps, dy, "l2_norm");
}

// ---- conv1d + SiLU: a thread per (channel, tile of kConvTile tokens); the history is reread from
// x (or the old state before token 0), so tiles run in parallel (one thread per channel walking
// all 8K tokens was 47 ms of an 8K prefill). The new state is written by a second launch, after
// every tile has read the old one, except when each sequence is a single tile (decode steps): then
// that tile writes it, saving a launch. ----

namespace {

constexpr int kConvTile = 16;
constexpr int kConvMaxW = 8;

// Rows [t0, t0 + n) of one channel c, for tokens [r0, r0 + kConvTile) of the sequence; with
// own_state (the sequence is this one tile) also the channel's new history.
__device__ void conv_tile(const float* x, const float* w, float* state, int64_t n, int64_t C, int W,
                          int64_t c, int64_t r0, bool own_state, float* y) {
  const int H = W - 1;
  float hist[kConvMaxW];
  for (int j = 0; j < H; ++j) {  // hist[j] is token r0 - H + j
    const int64_t i = r0 - H + j;
    hist[j] = i >= 0 ? x[i * C + c] : state[c * H + (H + i)];
  }
  const float* wc = w + c * W;
  const int64_t end = r0 + kConvTile < n ? r0 + kConvTile : n;
  for (int64_t t = r0; t < end; ++t) {
    const float cur = x[t * C + c];
    float acc = wc[H] * cur;
    for (int j = 0; j < H; ++j) acc += wc[j] * hist[j];
    y[t * C + c] = acc / (1.0f + expf(-acc));
    for (int j = 0; j + 1 < H; ++j) hist[j] = hist[j + 1];
    if (H > 0) hist[H - 1] = cur;
  }
  if (own_state) {
    for (int j = 0; j < H; ++j) state[c * H + j] = hist[j];
  }
}

// The new history of channel c: tokens n - H .. n - 1, from x or (n < H) the old state. Ascending
// j reads state[n + j] >= j, not yet overwritten.
__device__ void conv_state(const float* x, float* state, int64_t n, int64_t C, int W, int64_t c) {
  const int H = W - 1;
  for (int j = 0; j < H; ++j) {
    const int64_t i = n - H + j;
    state[c * H + j] = i >= 0 ? x[i * C + c] : state[c * H + (H + i)];
  }
}

__global__ void conv_kernel(const float* x, const float* w, float* state, int64_t T, int64_t C,
                            int W, bool own_state, float* y) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t r0 = int64_t{blockIdx.y} * kConvTile;
  if (c < C && r0 < T) conv_tile(x, w, state, T, C, W, c, r0, own_state, y);
}

__global__ void conv_state_kernel(const float* x, float* state, int64_t T, int64_t C, int W) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c < C) conv_state(x, state, T, C, W, c);
}

// The varlen batch: blockIdx.z is the sequence (its rows and its own history).
__global__ void conv_batch_kernel(const float* x, const float* w, const Conv1dSeq* seqs, int64_t C,
                                  int W, bool own_state, float* y) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t r0 = int64_t{blockIdx.y} * kConvTile;
  const Conv1dSeq q = seqs[blockIdx.z];
  if (c < C && r0 < q.n)
    conv_tile(x + q.t0 * C, w, q.state, q.n, C, W, c, r0, own_state, y + q.t0 * C);
}

__global__ void conv_batch_state_kernel(const float* x, const Conv1dSeq* seqs, int64_t C, int W) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const Conv1dSeq q = seqs[blockIdx.y];
  if (c < C) conv_state(x + q.t0 * C, q.state, q.n, C, W, c);
}

unsigned conv_tiles(int64_t n, const char* what) {
  const int64_t tiles = (n + kConvTile - 1) / kConvTile;
  check(tiles <= 65535, what, " (cuda): ", n, " tokens (", 65535 * int64_t{kConvTile}, " at most)");
  return static_cast<unsigned>(tiles < 1 ? 1 : tiles);
}

}  // namespace

void conv1d_silu_cuda(const float* x, const float* w, float* state, Conv1dShape s, float* y) {
  check(s.W >= 1 && s.W <= 8, "conv1d_silu (cuda): kernel width ", s.W, " (1 to 8 supported)");
  if (s.C == 0) return;
  Args a;
  const float* dx = a.in(x, s.T * s.C);
  const float* dw = a.in(w, s.C * s.W);
  float* ds = a.inout(state, s.C * (s.W - 1));
  float* dy = a.out(y, s.T * s.C);
  const unsigned cb = static_cast<unsigned>(blocks_for(s.C, 128));
  const dim3 grid(cb, conv_tiles(s.T, "conv1d_silu"));
  const bool own_state = s.T <= kConvTile;
  cuda::launch(conv_kernel, grid, 128, 0, dx, dw, ds, s.T, s.C, static_cast<int>(s.W), own_state,
               dy);
  check_launch("conv1d_silu");
  if (own_state) return;
  cuda::launch(conv_state_kernel, cb, 128, 0, dx, ds, s.T, s.C, static_cast<int>(s.W));
  check_launch("conv1d_silu state");
}

void conv1d_silu_batch_cuda(const float* x, const float* w, const Conv1dSeq* seqs, int64_t n_seqs,
                            Conv1dShape s, float* y) {
  check(s.W >= 1 && s.W <= 8, "conv1d_silu_batch (cuda): kernel width ", s.W,
        " (1 to 8 supported)");
  check(n_seqs <= 65535, "conv1d_silu_batch (cuda): ", n_seqs, " sequences (65535 at most)");
  if (s.C == 0 || n_seqs == 0) return;
  Args a;
  int64_t T = 0, max_n = 0;
  for (int64_t i = 0; i < n_seqs; ++i) {
    check(seqs[i].t0 >= 0 && seqs[i].n >= 0, "conv1d_silu_batch (cuda): sequence ", i, " rows");
    T = std::max(T, seqs[i].t0 + seqs[i].n);
    max_n = std::max(max_n, seqs[i].n);
  }
  const float* dx = a.in(x, T * s.C);
  const float* dw = a.in(w, s.C * s.W);
  float* dy = a.inout(y, T * s.C);  // rows of no sequence are kept
  std::vector<Conv1dSeq> dev(seqs, seqs + n_seqs);
  for (Conv1dSeq& q : dev) q.state = a.inout(q.state, s.C * (s.W - 1));
  const Conv1dSeq* dseqs = a.host_array(dev.data(), dev.size());
  const unsigned cb = static_cast<unsigned>(blocks_for(s.C, 128));
  const unsigned ns = static_cast<unsigned>(n_seqs);
  const dim3 grid(cb, conv_tiles(max_n, "conv1d_silu_batch"), ns);
  const bool own_state = max_n <= kConvTile;
  cuda::launch(conv_batch_kernel, grid, 128, 0, dx, dw, dseqs, s.C, static_cast<int>(s.W),
               own_state, dy);
  check_launch("conv1d_silu_batch");
  if (own_state) return;
  cuda::launch(conv_batch_state_kernel, dim3(cb, ns), 128, 0, dx, dseqs, s.C,
               static_cast<int>(s.W));
  check_launch("conv1d_silu_batch state");
}

// ---- AttnRes mix: a block per (token, candidate) for the scores, then one thread per output
// element (one block per token walked the candidates one after another: 32 µs a decode mix) ----

namespace {

constexpr int kMaxCands = 64;

// (v · w) / rms(v) over one candidate row v [d], a block's sums (valid in every thread).
template <bool kVec>  // kVec: d % 4 == 0, v and w 16-byte aligned
__device__ inline float candidate_score(const float* v, int64_t d, const float* w, float eps) {
  float ss = 0, dot = 0;
  if (kVec) {
    for (int64_t j = threadIdx.x; j < d / 4; j += blockDim.x) {
      const float4 a = reinterpret_cast<const float4*>(v)[j];
      const float4 b = reinterpret_cast<const float4*>(w)[j];
      ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
      dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
  } else {
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      ss += v[j] * v[j];
      dot += v[j] * w[j];
    }
  }
  ss = cuda::block_sum(ss);
  dot = cuda::block_sum(dot);
  return dot / sqrtf(ss / static_cast<float>(d) + eps);
}

// score [T, n]: score[t, i] = (v · w) / rms(v) for v = cands[i][t].
template <bool kVec>  // kVec: d % 4 == 0, rows and w 16-byte aligned
__global__ void attn_res_scores(const float* const* cands, int n, int64_t d, const float* w,
                                float eps, float* score) {
  const int64_t t = blockIdx.x;
  const int i = static_cast<int>(blockIdx.y);
  const float sc = candidate_score<kVec>(cands[i] + t * d, d, w, eps);
  if (threadIdx.x == 0) score[t * n + i] = sc;
}

// out [T, d] = Σ_i softmax_i(score[t]) · cands[i][t].
__global__ void attn_res_apply(const float* const* cands, int n, int64_t T, int64_t d,
                               const float* score, float* out) {
  const int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (idx >= T * d) return;
  const int64_t t = idx / d;
  const float* sc = score + t * n;
  float mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = fmaxf(mx, sc[i]);
  float sum = 0, acc = 0;
  for (int i = 0; i < n; ++i) {
    const float e = expf(sc[i] - mx);
    sum += e;
    acc += e * cands[i][idx];
  }
  out[idx] = acc / sum;
}

// y [T, d] = rms_norm(mix, w_norm) for mix = attn_res_apply's output, one block per token: the
// same per-thread partial sums, block sums and expressions as attn_res_scores, attn_res_apply
// and norm_kernel<0> at the same block size, so the fused result equals the three kernels'
// bit for bit. The mix goes to y first and each thread reads back only what it wrote.
template <bool kVec>
__global__ void attn_res_norm_kernel(const float* const* cands, int n, int64_t d, const float* w,
                                     const float* wn, float eps, float* y) {
  __shared__ float score[kMaxCands];
  const int64_t t = blockIdx.x;
  for (int i = 0; i < n; ++i) {
    const float sc = candidate_score<kVec>(cands[i] + t * d, d, w, eps);
    if (threadIdx.x == 0) score[i] = sc;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = fmaxf(mx, score[i]);
  auto mix = [&](int64_t j) {  // element j of the mix
    float sum = 0, acc = 0;
    for (int i = 0; i < n; ++i) {
      const float e = expf(score[i] - mx);
      sum += e;
      acc += e * cands[i][t * d + j];
    }
    return acc / sum;
  };
  float* yr = y + t * d;
  double ss = 0;
  if (kVec) {
    for (int64_t j = threadIdx.x; j < d / 4; j += blockDim.x) {
      const float4 m = make_float4(mix(4 * j), mix(4 * j + 1), mix(4 * j + 2), mix(4 * j + 3));
      ss += sq4(m);
      reinterpret_cast<float4*>(yr)[j] = m;
    }
  } else {
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float m = mix(j);
      ss += double(m) * m;
      yr[j] = m;
    }
  }
  ss = cuda::block_sum(ss);
  const float r = static_cast<float>(1.0 / sqrt(ss / double(d) + eps));
  if (kVec) {
    for (int64_t j = threadIdx.x; j < d / 4; j += blockDim.x) {
      const float4 m = reinterpret_cast<const float4*>(yr)[j];
      const float4 g = reinterpret_cast<const float4*>(wn)[j];
      reinterpret_cast<float4*>(yr)[j] =
          make_float4(g.x * (m.x * r), g.y * (m.y * r), g.z * (m.z * r), g.w * (m.w * r));
    }
  } else {
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = wn[j] * (yr[j] * r);
  }
}

// The candidates' device table, and whether their rows and w allow 16-byte loads.
struct DeviceCands {
  const float* const* table;
  bool vec;
};
DeviceCands device_cands(Args& a, const float* const* cands, AttnResShape s, const float* dw) {
  std::vector<const float*> dev(static_cast<size_t>(s.n));
  bool vec = s.d % 4 == 0 && al16(dw);
  for (int64_t i = 0; i < s.n; ++i) {
    dev[i] = a.in(cands[i], s.T * s.d);
    vec &= al16(dev[i]);
  }
  return {a.host_array(dev.data(), dev.size()), vec};
}

}  // namespace

void attn_res_norm_cuda(const float* const* cands, AttnResShape s, const float* w,
                        const float* w_norm, float eps, float* out) {
  check(s.n >= 1 && s.n <= kMaxCands, "attn_res_norm (cuda): ", s.n, " candidates (1 to ",
        kMaxCands, ")");
  if (s.T == 0) return;
  Args a;
  const float* dw = a.in(w, s.d);
  const float* dwn = a.in(w_norm, s.d);
  float* dout = a.out(out, s.T * s.d);
  const DeviceCands dcs = device_cands(a, cands, s, dw);
  const float* const* dc = dcs.table;
  const bool vec = dcs.vec && al16(dwn) && al16(dout);
  const int threads = row_threads(s.d, vec);  // the scores' and the norm's (same sums, same bits)
  const unsigned grid = static_cast<unsigned>(s.T);
  if (vec) {
    cuda::launch(attn_res_norm_kernel<true>, grid, threads, 0, dc, static_cast<int>(s.n), s.d, dw,
                 dwn, eps, dout);
  } else {
    cuda::launch(attn_res_norm_kernel<false>, grid, threads, 0, dc, static_cast<int>(s.n), s.d, dw,
                 dwn, eps, dout);
  }
  check_launch("attn_res_norm");
}

void attn_res_mix_cuda(const float* const* cands, AttnResShape s, const float* w, float eps,
                       float* out) {
  check(s.n >= 1 && s.n <= kMaxCands, "attn_res_mix (cuda): ", s.n, " candidates (1 to ", kMaxCands,
        ")");
  if (s.T == 0) return;
  Args a;
  const float* dw = a.in(w, s.d);
  float* dout = a.out(out, s.T * s.d);
  const DeviceCands dcs = device_cands(a, cands, s, dw);
  const float* const* dc = dcs.table;
  const bool vec = dcs.vec;
  cuda::Scratch score(static_cast<size_t>(s.T * s.n) * sizeof(float));
  auto* sc = static_cast<float*>(score.get());
  const int threads = row_threads(s.d, vec);  // a thread per load (a decode mix: one block each)
  const dim3 grid(static_cast<unsigned>(s.T), static_cast<unsigned>(s.n));
  if (vec) {
    cuda::launch(attn_res_scores<true>, grid, threads, 0, dc, static_cast<int>(s.n), s.d, dw, eps,
                 sc);
  } else {
    cuda::launch(attn_res_scores<false>, grid, threads, 0, dc, static_cast<int>(s.n), s.d, dw, eps,
                 sc);
  }
  check_launch("attn_res_mix (scores)");
  cuda::launch(attn_res_apply, blocks_for(s.T * s.d, kThreads), kThreads, 0, dc,
               static_cast<int>(s.n), s.T, s.d, sc, dout);
  check_launch("attn_res_mix");
}

// ---- router: one warp per token. k rounds of a warp arg-max over the experts not yet taken
// (ties to the lower id, as the CPU's sort), scores and flags in shared memory; the choices
// sorted by rank and weighed with the CPU's arithmetic (the sum in ascending id order). One
// thread per token scanned all E experts k times through global memory: 160 µs a step. ----

namespace {

constexpr int kRouterWarps = 4;

struct ArgMax {
  float v;
  int e;  // -1: none
};

__device__ inline bool better(ArgMax a, ArgMax b) {  // a before b
  if (a.e < 0) return false;
  if (b.e < 0) return true;
  return a.v > b.v || (a.v == b.v && a.e < b.e);
}

__global__ void router_kernel(const float* logits, const float* bias, RouterParams p, int64_t T,
                              int32_t* sel, float* weight) {
  extern __shared__ unsigned char router_smem[];
  const int E = static_cast<int>(p.n_expert), k = static_cast<int>(p.top_k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x * int64_t{kRouterWarps} + warp;
  if (t >= T) return;  // the whole warp
  // Per warp: s [E] sigmoid scores, v [E] biased, chosen [k], order [k], taken [E].
  float* s = reinterpret_cast<float*>(router_smem) + int64_t{warp} * (2 * E + 2 * k);
  float* v = s + E;
  int32_t* chosen = reinterpret_cast<int32_t*>(v + E);
  int32_t* order = chosen + k;
  unsigned char* taken =
      router_smem + int64_t{kRouterWarps} * (2 * E + 2 * k) * 4 + int64_t{warp} * E;
  const float* lg = logits + t * E;
  for (int e = lane; e < E; e += 32) {
    s[e] = 1.0f / (1.0f + expf(-lg[e]));
    v[e] = s[e] + bias[e];
    taken[e] = 0;
  }
  __syncwarp();
  for (int i = 0; i < k; ++i) {
    ArgMax best{0.0f, -1};
    for (int e = lane; e < E; e += 32) {
      const ArgMax c{v[e], e};
      if (taken[e] == 0 && better(c, best)) best = c;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const ArgMax other{__shfl_xor_sync(0xffffffffu, best.v, o),
                         __shfl_xor_sync(0xffffffffu, best.e, o)};
      if (better(other, best)) best = other;
    }
    if (lane == 0) {
      chosen[i] = best.e;
      taken[best.e] = 1;
    }
    __syncwarp();
  }
  for (int i = lane; i < k; i += 32) {  // ascending expert id: each choice's rank
    int rank = 0;
    for (int j = 0; j < k; ++j) rank += chosen[j] < chosen[i];
    order[rank] = chosen[i];
  }
  __syncwarp();
  double sum = 0;  // the CPU's order: ascending id
  if (lane == 0) {
    for (int i = 0; i < k; ++i) sum += s[order[i]];
  }
  sum = __shfl_sync(0xffffffffu, sum, 0);
  const bool renorm = p.renormalize && k > 1;
  for (int i = lane; i < k; i += 32) {
    const float si = s[order[i]];
    const double wv = renorm ? si / (sum + 1e-20) : si;
    sel[t * k + i] = order[i];
    weight[t * k + i] = static_cast<float>(wv) * p.scale;
  }
}

}  // namespace

void router_cuda(const float* logits, const float* bias, RouterParams p, int64_t T, int32_t* sel,
                 float* weight) {
  if (T == 0) return;
  Args a;
  const float* dl = a.in(logits, T * p.n_expert);
  const float* db = a.in(bias, p.n_expert);
  int32_t* ds = a.out(sel, T * p.top_k);
  float* dw = a.out(weight, T * p.top_k);
  const size_t smem = static_cast<size_t>(kRouterWarps) * (p.n_expert * 9 + p.top_k * 8);
  check(p.top_k >= 1 && p.top_k <= p.n_expert && smem <= 48 * 1024, "router (cuda): ", p.n_expert,
        " experts top-", p.top_k, " (up to 1300 experts)");
  cuda::launch(router_kernel, blocks_for(T, kRouterWarps), 32 * kRouterWarps, smem, dl, db, p, T,
               ds, dw);
  check_launch("router");
}

}  // namespace k3
