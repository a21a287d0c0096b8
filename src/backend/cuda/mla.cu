// MLA attention on the device: correct simple kernels, one block per (query, head), keys in
// tiles of blockDim with an online softmax (scratch does not grow with the context). The
// absorbed op runs the split-KV kernels of mla_decode.cu; the simple absorbed kernel here is
// their fallback for latents wider than their tiles.
//   expanded: scores q_h·k_h over the causal window, o = Σ p v_h (in bf16 precision the
//             flash kernel of mla_prefill.cu for the K3 head widths).
//   absorbed: q̃ = W_UKᵀ q^N, scores q̃·ĉ + q^R·r over the paged latent cache, ō = Σ p ĉ,
//             o = W_UV ō.
#include "backend/cuda/launchers.h"
#include "backend/cuda/mla_prefill.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/runtime.cuh"
#include "core/precision.h"

namespace k3 {
namespace {

using cuda::Args;
using cuda::check_launch;
using cuda::stream;

constexpr int kThreads = 128;

__device__ inline float block_max(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int i = 0; i < (blockDim.x + 31) / 32; ++i) m = fmaxf(m, part[i]);
  return m;
}

// Online softmax over tiles: each thread scores one key of the tile (score(τ) callable), then
// the block rescales its accumulator acc[0..D) (thread-strided) and adds p·value(τ)[d].
// Returns the normaliser Σ e^{s−m}.
template <typename Score, typename Value>
__device__ float online_softmax(int64_t n, float* acc, int D, float* p, Score score, Value value) {
  float mx = -INFINITY, sum = 0;
  for (int64_t t0 = 0; t0 < n; t0 += blockDim.x) {
    const int64_t tau = t0 + threadIdx.x;
    const float s = tau < n ? score(tau) : -INFINITY;
    const float new_mx = fmaxf(mx, block_max(s));
    const float e = tau < n ? expf(s - new_mx) : 0.0f;
    p[threadIdx.x] = e;
    const float rescale = expf(mx - new_mx);    // 0 on the first tile
    const float tile_sum = cuda::block_sum(e);  // its barriers also publish p[]
    sum = sum * rescale + tile_sum;
    mx = new_mx;
    const int m = static_cast<int>(n - t0 < blockDim.x ? n - t0 : blockDim.x);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
      float a = acc[d] * rescale;
      for (int j = 0; j < m; ++j) a += p[j] * value(t0 + j, d);
      acc[d] = a;
    }
    __syncthreads();  // p[] is rewritten by the next tile
  }
  return sum;
}

__global__ void expanded_kernel(const float* q, const float* k, const float* v, MlaShape s,
                                float scale, float* o) {
  extern __shared__ float sm[];  // acc [Dv], then p [blockDim]
  const int64_t t = blockIdx.x, h = blockIdx.y, H = s.H, Dq = s.Dn + s.Dr, Dv = s.Dv;
  float* acc = sm;
  float* p = sm + Dv;
  for (int d = threadIdx.x; d < Dv; d += blockDim.x) acc[d] = 0;
  const float* qh = q + (t * H + h) * Dq;
  const float sum = online_softmax(
      s.n_past + t + 1, acc, static_cast<int>(Dv), p,
      [&](int64_t tau) {
        const float* kh = k + (tau * H + h) * Dq;
        float a = 0;
        for (int64_t i = 0; i < Dq; ++i) a += qh[i] * kh[i];
        return a * scale;
      },
      [&](int64_t tau, int d) { return v[(tau * H + h) * Dv + d]; });
  for (int d = threadIdx.x; d < Dv; d += blockDim.x) o[(t * H + h) * Dv + d] = acc[d] / sum;
}

// Expanded attention over query tiles: a block owns kQ queries of one head and streams the
// keys/values in tiles of kKT through shared memory, so each key is read once per kQ queries
// (the one-query kernel re-read every key for every query). Needs Dv <= blockDim (128).
constexpr int kQ = 16, kKT = 32;

__global__ void expanded_tiled(const float* q, const float* k, const float* v, MlaShape s,
                               float scale, float* o) {
  extern __shared__ float sm[];
  const int64_t H = s.H, Dq = s.Dn + s.Dr, Dv = s.Dv, t0 = blockIdx.x * int64_t{kQ};
  const int64_t h = blockIdx.y, ldk = Dq + 1;  // padded rows: no bank conflicts in the dots
  const int nq = static_cast<int>(min(int64_t{kQ}, s.T - t0));
  float* qs = sm;              // [kQ, Dq]
  float* ks = qs + kQ * Dq;    // [kKT, Dq + 1]
  float* vs = ks + kKT * ldk;  // [kKT, Dv]
  float* ps = vs + kKT * Dv;   // [kQ, kKT]
  float* mx = ps + kQ * kKT;   // [kQ] running max
  float* sum = mx + kQ;        // [kQ] running normaliser
  float* fac = sum + kQ;       // [kQ] this tile's rescale
  const int tid = threadIdx.x;
  for (int64_t i = tid; i < kQ * Dq; i += blockDim.x) {
    const int64_t qi = i / Dq;
    qs[i] = qi < nq ? q[((t0 + qi) * H + h) * Dq + i % Dq] : 0.0f;
  }
  if (tid < kQ) {
    mx[tid] = -INFINITY;
    sum[tid] = 0.0f;
  }
  float acc[kQ] = {};
  const int64_t n_keys = s.n_past + t0 + nq;  // the last query's window
  for (int64_t k0 = 0; k0 < n_keys; k0 += kKT) {
    const int nk = static_cast<int>(min(int64_t{kKT}, n_keys - k0));
    __syncthreads();  // previous tile's reads done (and qs/mx written on the first)
    for (int64_t i = tid; i < kKT * Dq; i += blockDim.x) {
      const int64_t j = i / Dq;
      ks[j * ldk + i % Dq] = j < nk ? k[((k0 + j) * H + h) * Dq + i % Dq] : 0.0f;
    }
    for (int64_t i = tid; i < kKT * Dv; i += blockDim.x) {
      const int64_t j = i / Dv;
      vs[i] = j < nk ? v[((k0 + j) * H + h) * Dv + i % Dv] : 0.0f;
    }
    __syncthreads();
    for (int i = tid; i < kQ * kKT; i += blockDim.x) {
      const int qi = i / kKT, j = i % kKT;
      const int64_t key = k0 + j;
      float sc = -INFINITY;
      if (qi < nq && j < nk && key <= s.n_past + t0 + qi) {
        float d = 0;
        for (int64_t c = 0; c < Dq; ++c) d += qs[qi * Dq + c] * ks[j * ldk + c];
        sc = d * scale;
      }
      ps[i] = sc;
    }
    __syncthreads();
    if (tid < kQ) {  // online softmax, one thread per query
      float tile = -INFINITY;
      for (int j = 0; j < kKT; ++j) tile = fmaxf(tile, ps[tid * kKT + j]);
      const float m_new = fmaxf(mx[tid], tile);
      float f = 1.0f, add = 0.0f;
      if (m_new != -INFINITY) {
        f = expf(mx[tid] - m_new);  // 0 while nothing was seen
        for (int j = 0; j < kKT; ++j) {
          const float p = expf(ps[tid * kKT + j] - m_new);  // masked: e^-inf = 0
          ps[tid * kKT + j] = p;
          add += p;
        }
        mx[tid] = m_new;
      } else {
        for (int j = 0; j < kKT; ++j) ps[tid * kKT + j] = 0.0f;
      }
      sum[tid] = sum[tid] * f + add;
      fac[tid] = f;
    }
    __syncthreads();
    if (tid < Dv) {
#pragma unroll
      for (int qi = 0; qi < kQ; ++qi) {
        float a = acc[qi] * fac[qi];
        for (int j = 0; j < nk; ++j) a += ps[qi * kKT + j] * vs[j * Dv + tid];
        acc[qi] = a;
      }
    }
  }
  __syncthreads();
  if (tid < Dv) {
#pragma unroll
    for (int qi = 0; qi < kQ; ++qi) {
      if (qi < nq) o[((t0 + qi) * H + h) * Dv + tid] = acc[qi] / sum[qi];
    }
  }
}

size_t tiled_smem(const MlaShape& s) {
  const int64_t Dq = s.Dn + s.Dr;
  return static_cast<size_t>(kQ * Dq + kKT * (Dq + 1) + kKT * s.Dv + kQ * kKT + 3 * kQ) * 4;
}

__device__ inline float wload(const void* w, bool bf16, int64_t i) {
  return bf16 ? __uint_as_float(uint32_t{static_cast<const uint16_t*>(w)[i]} << 16)
              : static_cast<const float*>(w)[i];
}

struct Cache {
  const float* base;
  const int32_t* blocks;  // device
  int64_t block_tokens, block_stride, width;
  __device__ const float* row(int64_t t) const {
    return base + blocks[t / block_tokens] * block_stride + (t % block_tokens) * width;
  }
};

__global__ void absorbed_kernel(const float* q, Cache cache, const void* uk_t, const void* kv_b,
                                bool bf16, MlaShape s, float scale, float* o) {
  extern __shared__ float sm[];  // qt [Dc], acc [Dc], p [blockDim]
  const int64_t t = blockIdx.x, h = blockIdx.y, H = s.H, Dn = s.Dn, Dr = s.Dr, Dc = s.Dc;
  const int64_t Dq = Dn + Dr, Dv = s.Dv;
  float* qt = sm;
  float* acc = sm + Dc;
  float* p = acc + Dc;
  const float* qh = q + (t * H + h) * Dq;
  for (int64_t c = threadIdx.x; c < Dc; c += blockDim.x) {  // q̃ = W_UKᵀ q^N
    float a = 0;
    for (int64_t i = 0; i < Dn; ++i) a += wload(uk_t, bf16, (h * Dc + c) * Dn + i) * qh[i];
    qt[c] = a;
    acc[c] = 0;
  }
  __syncthreads();
  const float sum = online_softmax(
      s.n_past + t + 1, acc, static_cast<int>(Dc), p,
      [&](int64_t tau) {
        const float* ct = cache.row(tau);
        float a = 0;
        for (int64_t c = 0; c < Dc; ++c) a += qt[c] * ct[c];
        for (int64_t i = 0; i < Dr; ++i) a += qh[Dn + i] * ct[Dc + i];
        return a * scale;
      },
      [&](int64_t tau, int c) { return cache.row(tau)[c]; });
  __syncthreads();
  for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {  // o = W_UV ō
    const int64_t r = h * (Dn + Dv) + Dn + d;
    float a = 0;
    for (int64_t c = 0; c < Dc; ++c) a += wload(kv_b, bf16, r * Dc + c) * acc[c];
    o[(t * H + h) * Dv + d] = a / sum;
  }
}

size_t mat_bytes(const Mat& m) {
  return static_cast<size_t>(m.rows * m.cols) * (m.format == MatFormat::bf16 ? 2 : 4);
}

}  // namespace

void mla_expanded_cuda(const float* q, const float* k, const float* v, MlaShape s, float* o) {
  if (s.T == 0 || s.H == 0) return;
  Args a;
  const int64_t S = s.n_past + s.T, Dq = s.Dn + s.Dr;
  const float* dq = a.in(q, s.T * s.H * Dq);
  const float* dk = a.in(k, S * s.H * Dq);
  const float* dv = a.in(v, S * s.H * s.Dv);
  float* dout = a.out(o, s.T * s.H * s.Dv);
  // bf16 precision (core/precision.h): the flash kernel on the tensor cores (mla_prefill.h).
  if (active_precision() == Precision::bf16 && cuda::mla_prefill_bf16_supported(s)) {
    cuda::mla_prefill_bf16(dq, dk, dv, s, dout);
    return;
  }
  const float scale = 1.0f / sqrtf(static_cast<float>(Dq));
  const size_t tiled = tiled_smem(s);
  if (s.Dv <= kThreads && tiled <= 200 * 1024) {
    static size_t configured = 0;
    if (tiled > 48 * 1024 && tiled > configured) {
      cuda::check_cuda(
          cudaFuncSetAttribute(expanded_tiled, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(tiled)),
          "mla smem attribute");
      configured = tiled;
    }
    const dim3 grid(static_cast<unsigned>((s.T + kQ - 1) / kQ), static_cast<unsigned>(s.H));
    cuda::launch(expanded_tiled, grid, kThreads, tiled, dq, dk, dv, s, scale, dout);
    check_launch("mla_expanded (tiled)");
    return;
  }
  const size_t smem = static_cast<size_t>(s.Dv + kThreads) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(s.T), static_cast<unsigned>(s.H));
  cuda::launch(expanded_kernel, grid, kThreads, smem, dq, dk, dv, s, scale, dout);
  check_launch("mla_expanded");
}

void mla_absorbed_cuda(const float* q, const PagedRows& cache, const MlaAbsorbedWeights& w,
                       MlaShape s, float* o) {
  const MlaBatchSeq seq{0, s.T, s.n_past, cache};
  mla_absorbed_batch_cuda(q, &seq, 1, w, s, o);
}

void mla_absorbed_simple_cuda(const float* q, const PagedRows& cache, const MlaAbsorbedWeights& w,
                              MlaShape s, float* o) {
  if (s.T == 0 || s.H == 0) return;
  const Mat& uk = w.uk_t;
  check(uk.format == w.kv_b.format && uk.format != MatFormat::mxfp4,
        "mla_absorbed (cuda): BF16 or F32 attention weights only");
  Args a;
  const int64_t S = s.n_past + s.T, Dq = s.Dn + s.Dr;
  const int64_t n_blocks = cache.block_tokens >= S ? 1 : (S - 1) / cache.block_tokens + 1;
  int64_t extent = 0;  // floats of the cache the rows reach (for staging)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t rows = std::min(cache.block_tokens, S - b * cache.block_tokens);
    extent = std::max(extent, cache.blocks[b] * cache.block_stride + rows * cache.width);
  }
  const Cache dc{a.in(cache.base, extent), a.host_array(cache.blocks, n_blocks), cache.block_tokens,
                 cache.block_stride, cache.width};
  const float* dq = a.in(q, s.T * s.H * Dq);
  const void* duk = a.in(static_cast<const uint8_t*>(uk.data), mat_bytes(uk));
  const void* dkv = a.in(static_cast<const uint8_t*>(w.kv_b.data), mat_bytes(w.kv_b));
  float* dout = a.out(o, s.T * s.H * s.Dv);
  const size_t smem = static_cast<size_t>(2 * s.Dc + kThreads) * sizeof(float);
  check(smem <= 48 * 1024, "mla_absorbed (cuda): latent width ", s.Dc, " too large");
  const dim3 grid(static_cast<unsigned>(s.T), static_cast<unsigned>(s.H));
  cuda::launch(absorbed_kernel, grid, kThreads, smem, dq, dc, duk, dkv,
               uk.format == MatFormat::bf16, s, 1.0f / sqrtf(static_cast<float>(Dq)), dout);
  check_launch("mla_absorbed");
}

}  // namespace k3
