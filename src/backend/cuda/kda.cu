// KDA delta rule on the device. One block per (segment, head) runs the recurrence token by
// token with the head's state S [K, V] in shared memory: thread j owns column j (V threads),
// so every update is a column walk with no cross-thread reduction but the shared k, q, g.
// A segment is a run of consecutive tokens of one sequence with its own state (the whole
// prompt: recurrent; the chunked form has its own kernel, kda_chunked.cu). The decode step has its
// own kernel (kda_decode_step, below).
#include <cstdlib>

#include "backend/cuda/launchers.h"
#include "backend/cuda/runtime.cuh"

namespace k3 {
namespace {

using cuda::Args;
using cuda::check_launch;
using cuda::stream;

struct Segment {
  int64_t t0, n;  // token rows
  float* S;       // [H, K, V]
};

constexpr int kMaxK = 256;

__global__ void kda_segments(const float* q, const float* k, const float* v, const float* g,
                             const float* beta, const Segment* segs, int H, int K, int V,
                             float* o) {
  extern __shared__ float S[];    // [K, V]
  __shared__ float kq[3][kMaxK];  // k, q, exp(g) of the current token
  const Segment seg = segs[blockIdx.x];
  const int h = blockIdx.y, j = threadIdx.x;
  float* Sg = seg.S + int64_t{h} * K * V;
  for (int i = 0; i < K; ++i) S[i * V + j] = Sg[i * V + j];
  for (int64_t t = seg.t0; t < seg.t0 + seg.n; ++t) {
    const int64_t row = t * H + h;
    __syncthreads();  // previous token's kq reads done
    for (int i = j; i < K; i += V) {
      kq[0][i] = k[row * K + i];
      kq[1][i] = q[row * K + i];
      kq[2][i] = expf(g[row * K + i]);
    }
    __syncthreads();
    float u = v[row * V + j];
    for (int i = 0; i < K; ++i) {
      const float s = S[i * V + j] * kq[2][i];
      S[i * V + j] = s;
      u -= s * kq[0][i];
    }
    const float bu = beta[row] * u;
    float out = 0;
    for (int i = 0; i < K; ++i) {
      const float s = S[i * V + j] + kq[0][i] * bu;
      S[i * V + j] = s;
      out += s * kq[1][i];
    }
    o[row * V + j] = out;
  }
  for (int i = 0; i < K; ++i) Sg[i * V + j] = S[i * V + j];
}

void launch(const KdaInputs& in, const Segment* dsegs, int64_t n_segs, KdaShape s, float* o) {
  check(s.K >= 1 && s.K <= kMaxK && s.V >= 1 && s.V <= 1024, "kda (cuda): K ", s.K, ", V ", s.V,
        " (K up to ", kMaxK, ", V up to 1024)");
  const size_t smem = static_cast<size_t>(s.K * s.V) * sizeof(float);
  check(smem <= 200 * 1024, "kda (cuda): state of ", smem, " bytes does not fit shared memory");
  static size_t configured = 0;
  if (smem > 48 * 1024 && smem > configured) {
    cuda::check_cuda(cudaFuncSetAttribute(kda_segments, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)),
                     "kda smem attribute");
    configured = smem;
  }
  const dim3 grid(static_cast<unsigned>(n_segs), static_cast<unsigned>(s.H));
  cuda::launch(kda_segments, grid, static_cast<unsigned>(s.V), smem, in.q, in.k, in.v, in.g,
               in.beta, dsegs, static_cast<int>(s.H), static_cast<int>(s.K), static_cast<int>(s.V),
               o);
  check_launch("kda");
}

// The device view of the inputs over T token rows.
KdaInputs stage_inputs(Args& a, const KdaInputs& in, int64_t T, KdaShape s) {
  const int64_t th = T * s.H;
  return {a.in(in.q, th * s.K), a.in(in.k, th * s.K), a.in(in.v, th * s.V), a.in(in.g, th * s.K),
          a.in(in.beta, th)};
}

void run_one(const KdaInputs& in, KdaShape s, float* S, float* o) {
  if (s.T == 0 || s.H == 0) return;
  Args a;
  const KdaInputs d = stage_inputs(a, in, s.T, s);
  float* dS = a.inout(S, s.H * s.K * s.V);
  float* dout = a.out(o, s.T * s.H * s.V);
  const Segment seg{0, s.T, dS};
  launch(d, a.host_array(&seg, 1), 1, s, dout);
}

// The decode step (one token per sequence) spread over the whole chip: a block owns 32 value
// columns of one (sequence, head); warp r holds rows r, r+8, … of those columns in registers
// (read once, written once), so the two column sums (Sᵀk and Sᵀq) are one cross-warp
// reduction each. Up to kDecodeSeqs sequences per launch, their rows and states in a table.
constexpr int kDecodeSeqs = 64, kDecodeThreads = 256, kDecodeRowGroups = kDecodeThreads / 32;

struct DecodeSeqs {
  int64_t t0[kDecodeSeqs];
  float* S[kDecodeSeqs];
};

template <int kRowsPerThread>
__global__ void __launch_bounds__(kDecodeThreads)
    kda_decode_step(const float* q, const float* k, const float* v, const float* g,
                    const float* beta, const DecodeSeqs* seqs, int H, int K, int V, int vtiles,
                    float* o) {
  __shared__ float kk[kMaxK], qq[kMaxK], ag[kMaxK];
  __shared__ float red[kDecodeRowGroups][32];
  const int si = blockIdx.x / vtiles, lane = threadIdx.x % 32, rg = threadIdx.x / 32;
  const int j = (blockIdx.x % vtiles) * 32 + lane, h = blockIdx.y;
  const int64_t row = seqs->t0[si] * H + h;
  float* S = seqs->S[si] + int64_t{h} * K * V;
  float st[kRowsPerThread];
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {  // the state loads first: all in flight at once
    const int i = rg + kDecodeRowGroups * m;
    st[m] = i < K && j < V ? S[int64_t{i} * V + j] : 0.0f;
  }
  for (int i = threadIdx.x; i < K; i += kDecodeThreads) {
    kk[i] = k[row * K + i];
    qq[i] = q[row * K + i];
    ag[i] = expf(g[row * K + i]);
  }
  __syncthreads();
  float part = 0;
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int i = rg + kDecodeRowGroups * m;
    if (i < K) {
      st[m] *= ag[i];
      part += st[m] * kk[i];
    }
  }
  red[rg][lane] = part;
  __syncthreads();
  float u = j < V ? v[row * V + j] : 0.0f;
  for (int r = 0; r < kDecodeRowGroups; ++r) u -= red[r][lane];
  const float bu = beta[row] * u;
  part = 0;
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int i = rg + kDecodeRowGroups * m;
    if (i < K) {
      st[m] += kk[i] * bu;
      part += st[m] * qq[i];
    }
  }
  __syncthreads();  // every warp has read red
  red[rg][lane] = part;
  __syncthreads();
  if (rg == 0 && j < V) {
    float out = 0;
    for (int r = 0; r < kDecodeRowGroups; ++r) out += red[r][lane];
    o[row * V + j] = out;
  }
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int i = rg + kDecodeRowGroups * m;
    if (i < K && j < V) S[int64_t{i} * V + j] = st[m];
  }
}

// The same step on float4 columns (V % 4 == 0, 16-byte aligned rows): a block owns 4·kLanes
// value columns (kLanes lanes × 4) of one (sequence, head); lane group r (256 / kLanes of
// them) holds rows r, r + 256 / kLanes, …. kLanes = 8 makes twice the blocks of 16: at batch 1
// (96 heads × 2 column tiles = 192 blocks on 132 SMs) the state's bytes then spread evenly
// over the chip instead of two blocks' worth on some SMs and one on others. The column sums
// add a warp's lane groups by shuffles first, then the block's warps through shared memory.
constexpr int kDecodeWarps = kDecodeThreads / 32;

// p summed over the lane groups of this warp (lanes kLanes apart hold the same columns).
template <int kLanes>
__device__ inline float4 sum_lane_groups(float4 p) {
#pragma unroll
  for (int o = kLanes; o < 32; o <<= 1) {
    p.x += __shfl_xor_sync(0xffffffffu, p.x, o);
    p.y += __shfl_xor_sync(0xffffffffu, p.y, o);
    p.z += __shfl_xor_sync(0xffffffffu, p.z, o);
    p.w += __shfl_xor_sync(0xffffffffu, p.w, o);
  }
  return p;
}

template <int kLanes, int kRowsPerThread>
__global__ void __launch_bounds__(kDecodeThreads)
    kda_decode_step4(const float* q, const float* k, const float* v, const float* g,
                     const float* beta, const DecodeSeqs* seqs, int H, int K, int V, int vtiles,
                     float* o) {
  constexpr int kGroups = kDecodeThreads / kLanes;
  __shared__ float kk[kMaxK], qq[kMaxK], ag[kMaxK];
  __shared__ float4 red[kDecodeWarps][kLanes];
  const int si = blockIdx.x / vtiles, l = threadIdx.x % kLanes, rg = threadIdx.x / kLanes;
  const int warp = threadIdx.x / 32;
  const bool first_group = threadIdx.x % 32 < kLanes;  // writes its warp's sums
  const int j4 = (blockIdx.x % vtiles) * kLanes + l, V4 = V / 4, h = blockIdx.y;
  const bool col = j4 < V4;
  const int64_t row = seqs->t0[si] * H + h;
  float4* S = reinterpret_cast<float4*>(seqs->S[si] + int64_t{h} * K * V);
  float4 st[kRowsPerThread];
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {  // the state loads first: all in flight at once
    const int i = rg + kGroups * m;
    st[m] = i < K && col ? S[int64_t{i} * V4 + j4] : make_float4(0, 0, 0, 0);
  }
  // v and beta now too: one memory round trip for all of the block's loads.
  float4 u = col ? reinterpret_cast<const float4*>(v + row * V)[j4] : make_float4(0, 0, 0, 0);
  const float b = beta[row];
  for (int i = threadIdx.x; i < K; i += kDecodeThreads) {
    kk[i] = k[row * K + i];
    qq[i] = q[row * K + i];
    ag[i] = expf(g[row * K + i]);
  }
  __syncthreads();
  float4 part = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int i = rg + kGroups * m;
    if (i < K) {
      const float a = ag[i], kv = kk[i];
      st[m].x *= a, st[m].y *= a, st[m].z *= a, st[m].w *= a;
      part.x += st[m].x * kv, part.y += st[m].y * kv, part.z += st[m].z * kv,
          part.w += st[m].w * kv;
    }
  }
  part = sum_lane_groups<kLanes>(part);
  if (first_group) red[warp][l] = part;
  __syncthreads();
  for (int r = 0; r < kDecodeWarps; ++r) {
    const float4 x = red[r][l];
    u.x -= x.x, u.y -= x.y, u.z -= x.z, u.w -= x.w;
  }
  const float4 bu = make_float4(b * u.x, b * u.y, b * u.z, b * u.w);
  part = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int i = rg + kGroups * m;
    if (i < K) {
      const float kv = kk[i], qv = qq[i];
      st[m].x += kv * bu.x, st[m].y += kv * bu.y, st[m].z += kv * bu.z, st[m].w += kv * bu.w;
      part.x += st[m].x * qv, part.y += st[m].y * qv, part.z += st[m].z * qv,
          part.w += st[m].w * qv;
    }
  }
  part = sum_lane_groups<kLanes>(part);
  __syncthreads();  // every thread has read red
  if (first_group) red[warp][l] = part;
  __syncthreads();
  if (rg == 0 && col) {
    float4 out = make_float4(0, 0, 0, 0);
    for (int r = 0; r < kDecodeWarps; ++r) {
      const float4 x = red[r][l];
      out.x += x.x, out.y += x.y, out.z += x.z, out.w += x.w;
    }
    reinterpret_cast<float4*>(o + row * V)[j4] = out;
  }
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int i = rg + kGroups * m;
    if (i < K && col) S[int64_t{i} * V4 + j4] = st[m];
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The float4 kernel when every row it touches is 16-byte aligned.
// seqs: the table on the host (alignment checks), dseqs: its device copy (the kernels').
template <int kLanes>
void launch_decode4_lanes(const KdaInputs& d, const DecodeSeqs* dseqs, int n, KdaShape s,
                          float* o) {
  constexpr int kGroups = kDecodeThreads / kLanes;
  const int K = static_cast<int>(s.K), V = static_cast<int>(s.V);
  const int vtiles = (V + 4 * kLanes - 1) / (4 * kLanes);
  const dim3 grid(static_cast<unsigned>(n * vtiles), static_cast<unsigned>(s.H));
  const int H = static_cast<int>(s.H);
  if (K <= 4 * kGroups) {
    cuda::launch(kda_decode_step4<kLanes, 4>, grid, kDecodeThreads, 0, d.q, d.k, d.v, d.g, d.beta,
                 dseqs, H, K, V, vtiles, o);
  } else if (K <= 8 * kGroups) {
    cuda::launch(kda_decode_step4<kLanes, 8>, grid, kDecodeThreads, 0, d.q, d.k, d.v, d.g, d.beta,
                 dseqs, H, K, V, vtiles, o);
  } else {
    cuda::launch(kda_decode_step4<kLanes, 16>, grid, kDecodeThreads, 0, d.q, d.k, d.v, d.g, d.beta,
                 dseqs, H, K, V, vtiles, o);
  }
}

// Lanes a row of the float4 kernel: 8 when 16 would give fewer than two blocks an SM
// (K3_KDA_DECODE_LANES=8|16 forces one, for A/B runs).
int decode_lanes(int n, KdaShape s) {
  static const int forced = [] {
    const char* e = std::getenv("K3_KDA_DECODE_LANES");
    return e != nullptr ? std::atoi(e) : 0;
  }();
  if (forced == 8 || forced == 16) return forced;
  const int64_t blocks16 = int64_t{n} * s.H * ((s.V + 63) / 64);
  return blocks16 < 2 * int64_t{cuda::sm_count()} ? 8 : 16;
}

// The float4 kernel when every row it touches is 16-byte aligned.
// seqs: the table on the host (alignment checks), dseqs: its device copy (the kernels').
bool launch_decode4(const KdaInputs& d, const DecodeSeqs& seqs, const DecodeSeqs* dseqs, int n,
                    KdaShape s, float* o) {
  if (s.V % 4 != 0 || !aligned16(d.v) || !aligned16(o)) return false;
  for (int i = 0; i < n; ++i) {
    if (!aligned16(seqs.S[i])) return false;
  }
  const int lanes = decode_lanes(n, s);
  // Rows a thread holds: at most 16 (kDecodeThreads / lanes groups of rows).
  if (s.K > 16 * (kDecodeThreads / lanes)) return false;
  if (lanes == 8) {
    launch_decode4_lanes<8>(d, dseqs, n, s, o);
  } else {
    launch_decode4_lanes<16>(d, dseqs, n, s, o);
  }
  check_launch("kda_decode (float4)");
  return true;
}

void launch_decode(const KdaInputs& d, const DecodeSeqs& seqs, const DecodeSeqs* dseqs, int n,
                   KdaShape s, float* o) {
  if (launch_decode4(d, seqs, dseqs, n, s, o)) return;
  const int K = static_cast<int>(s.K), V = static_cast<int>(s.V), vtiles = (V + 31) / 32;
  const dim3 grid(static_cast<unsigned>(n * vtiles), static_cast<unsigned>(s.H));
  const int H = static_cast<int>(s.H);
  if (K <= 8 * kDecodeRowGroups) {
    cuda::launch(kda_decode_step<8>, grid, kDecodeThreads, 0, d.q, d.k, d.v, d.g, d.beta, dseqs, H,
                 K, V, vtiles, o);
  } else if (K <= 16 * kDecodeRowGroups) {
    cuda::launch(kda_decode_step<16>, grid, kDecodeThreads, 0, d.q, d.k, d.v, d.g, d.beta, dseqs, H,
                 K, V, vtiles, o);
  } else {
    cuda::launch(kda_decode_step<32>, grid, kDecodeThreads, 0, d.q, d.k, d.v, d.g, d.beta, dseqs, H,
                 K, V, vtiles, o);
  }
  check_launch("kda_decode");
}

}  // namespace

void kda_recurrent_cuda(const KdaInputs& in, KdaShape s, float* S, float* o) {
  run_one(in, s, S, o);
}

void kda_decode_cuda(const KdaInputs& all, const KdaDecodeSeq* seqs, int64_t n, KdaShape s,
                     float* o) {
  if (n == 0 || s.H == 0) return;
  check(s.K >= 1 && s.K <= kMaxK && s.V >= 1, "kda_decode (cuda): K ", s.K, ", V ", s.V,
        " (K up to ", kMaxK, ")");
  Args a;
  int64_t T = 0;
  for (int64_t i = 0; i < n; ++i) T = std::max(T, seqs[i].t0 + 1);
  const KdaInputs d = stage_inputs(a, all, T, s);
  float* dout = a.inout(o, T * s.H * s.V);  // rows of other sequences are kept
  for (int64_t i0 = 0; i0 < n; i0 += kDecodeSeqs) {
    DecodeSeqs ds{};
    const int m = static_cast<int>(std::min<int64_t>(kDecodeSeqs, n - i0));
    for (int i = 0; i < m; ++i) {
      ds.t0[i] = seqs[i0 + i].t0;
      ds.S[i] = a.inout(seqs[i0 + i].S, s.H * s.K * s.V);
    }
    // The table on the device, not in the kernel parameters: a graphed decode step (graph.cuh)
    // then replays whichever sequences the batch holds.
    launch_decode(d, ds, a.host_array(&ds, 1), m, s, dout);
  }
}

}  // namespace k3
