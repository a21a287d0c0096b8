// KDA delta rule on the device. One block per (segment, head) runs the recurrence token by
// token with the head's state S [K, V] in shared memory: thread j owns column j (V threads),
// so every update is a column walk with no cross-thread reduction but the shared k, q, g.
// A segment is a run of consecutive tokens of one sequence with its own state: the whole
// prompt (recurrent, chunked) or one token of each sequence (decode, all sequences in one
// launch).
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
  kda_segments<<<grid, static_cast<unsigned>(s.V), smem, stream()>>>(
      in.q, in.k, in.v, in.g, in.beta, dsegs, static_cast<int>(s.H), static_cast<int>(s.K),
      static_cast<int>(s.V), o);
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

}  // namespace

void kda_recurrent_cuda(const KdaInputs& in, KdaShape s, float* S, float* o) {
  run_one(in, s, S, o);
}

void kda_chunked_cuda(const KdaInputs& in, KdaShape s, float* S, float* o) { run_one(in, s, S, o); }

void kda_decode_cuda(const KdaInputs& all, const KdaDecodeSeq* seqs, int64_t n, KdaShape s,
                     float* o) {
  if (n == 0 || s.H == 0) return;
  Args a;
  int64_t T = 0;
  for (int64_t i = 0; i < n; ++i) T = std::max(T, seqs[i].t0 + 1);
  const KdaInputs d = stage_inputs(a, all, T, s);
  float* dout = a.inout(o, T * s.H * s.V);  // rows of other sequences are kept
  std::vector<Segment> segs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    segs[i] = {seqs[i].t0, 1, a.inout(seqs[i].S, s.H * s.K * s.V)};
  }
  launch(d, a.host_array(segs.data(), segs.size()), n, s, dout);
}

}  // namespace k3
