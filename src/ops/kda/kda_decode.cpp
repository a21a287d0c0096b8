// The decode step of a batch: every (sequence, head) pair is one recurrent token update, run
// in one parallel loop (one fork/join for the whole batch).
#include "backend/cuda/launchers.h"
#include "core/parallel.h"
#include "ops/kda/kda.h"

namespace k3 {
namespace {

template <typename Step>
void each_seq_head(const KdaInputs& all, const KdaDecodeSeq* seqs, int64_t n, KdaShape s, float* o,
                   bool parallel, Step step) {
  const int64_t H = s.H, K = s.K, V = s.V;
  // Split only states big enough to pay for the hand-off (32K floats = 128 KB read and written).
  const bool big = n * H > 1 && n * H * K * V > (int64_t{1} << 15);
  parallel_for(n * H, parallel && big, [&](int64_t it) {
    const KdaDecodeSeq& q = seqs[it / H];
    const int64_t h = it % H, r = q.t0 * H + h;  // (token, head) row
    const KdaInputs in{all.q + r * K, all.k + r * K, all.v + r * V, all.g + r * K, all.beta + r};
    step(in, KdaShape{1, 1, K, V}, q.S + h * K * V, o + r * V);
  });
}

}  // namespace

void kda_decode(const KdaInputs& all, const KdaDecodeSeq* seqs, int64_t n, KdaShape s, float* o) {
  each_seq_head(all, seqs, n, s, o, true, kda_recurrent);
}

void kda_decode_ref(const KdaInputs& all, const KdaDecodeSeq* seqs, int64_t n, KdaShape s,
                    float* o) {
  each_seq_head(all, seqs, n, s, o, false, kda_recurrent_ref);
}

const OpTable<KdaDecodeFn> kKdaDecodeOp =
    register_op<KdaDecodeFn>({.name = "kda_decode",
                              .ref = kda_decode_ref,
                              .cpu = kda_decode,
                              .cuda = K3_CUDA_IMPL(kda_decode_cuda)});

}  // namespace k3
