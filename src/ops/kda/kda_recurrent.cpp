#include <cmath>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/kda/kda.h"

namespace k3 {
namespace {

// One head, one token. S [K, V] row-major.
template <typename F>
void delta_step(const float* q, const float* k, const float* v, const float* g, float beta,
                int64_t K, int64_t V, F* S, F* u, float* o) {
  for (int64_t i = 0; i < K; ++i) {
    const F a = std::exp(static_cast<F>(g[i]));
    for (int64_t j = 0; j < V; ++j) S[i * V + j] *= a;
  }
  for (int64_t j = 0; j < V; ++j) u[j] = v[j];  // u = v − S̄ᵀ k
  for (int64_t i = 0; i < K; ++i) {
    const F ki = k[i];
    for (int64_t j = 0; j < V; ++j) u[j] -= S[i * V + j] * ki;
  }
  for (int64_t i = 0; i < K; ++i) {
    const F bk = beta * static_cast<F>(k[i]);
    for (int64_t j = 0; j < V; ++j) S[i * V + j] += bk * u[j];
  }
  for (int64_t j = 0; j < V; ++j) u[j] = 0;  // o = Sᵀ q
  for (int64_t i = 0; i < K; ++i) {
    const F qi = q[i];
    for (int64_t j = 0; j < V; ++j) u[j] += S[i * V + j] * qi;
  }
  for (int64_t j = 0; j < V; ++j) o[j] = static_cast<float>(u[j]);
}

template <typename F>
void run(const KdaInputs& in, KdaShape s, float* S, float* o) {
  const int64_t H = s.H, K = s.K, V = s.V;
  parallel_for(H, H > 1, [&](int64_t h) {
    F* Sh = thread_scratch<F, struct KdaStateTag>(static_cast<size_t>(K * V));
    F* u = thread_scratch<F, struct KdaUTag>(static_cast<size_t>(V));
    for (int64_t i = 0; i < K * V; ++i) Sh[i] = S[h * K * V + i];
    for (int64_t t = 0; t < s.T; ++t) {
      const int64_t th = t * H + h;
      delta_step<F>(in.q + th * K, in.k + th * K, in.v + th * V, in.g + th * K, in.beta[th], K, V,
                    Sh, u, o + th * V);
    }
    for (int64_t i = 0; i < K * V; ++i) S[h * K * V + i] = static_cast<float>(Sh[i]);
  });
}

}  // namespace

void kda_recurrent(const KdaInputs& in, KdaShape s, float* S, float* o) { run<float>(in, s, S, o); }

void kda_recurrent_ref(const KdaInputs& in, KdaShape s, float* S, float* o) {
  run<double>(in, s, S, o);
}

const OpTable<KdaRecurrentFn, KdaBwdFn> kKdaRecurrentOp =
    register_op<KdaRecurrentFn, KdaBwdFn>({.name = "kda_recurrent",
                                           .ref = kda_recurrent_ref,
                                           .cpu = kda_recurrent,
                                           .cuda = K3_CUDA_IMPL(kda_recurrent_cuda),
                                           .bwd = kda_recurrent_bwd});

}  // namespace k3
