#include <cmath>
#include <type_traits>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/kda/kda.h"

namespace k3 {
namespace {

// One head, one token. S [K, V] row-major. Two passes over the state instead of four: the
// decay fused with u = v − S̄ᵀ k, the rank-1 update fused with o = Sᵀ q. Every element sees the
// same operations in the same order as four separate passes (u and o still sum over i in
// ascending order), so the result is the same to the bit; the state is what decode streams
// through the cache, once per layer and head.
template <typename F>
void delta_step(const float* q, const float* k, const float* v, const float* g, float beta,
                int64_t K, int64_t V, F* S, F* u, float* o) {
  for (int64_t j = 0; j < V; ++j) u[j] = v[j];
  for (int64_t i = 0; i < K; ++i) {  // S̄ = diag(exp g) S, u = v − S̄ᵀ k
    const F a = std::exp(static_cast<F>(g[i])), ki = k[i];
    F* Si = S + i * V;
    for (int64_t j = 0; j < V; ++j) {
      Si[j] *= a;
      u[j] -= Si[j] * ki;
    }
  }
  F* acc = u + V;  // o = Sᵀ q after S = S̄ + β k uᵀ
  for (int64_t j = 0; j < V; ++j) acc[j] = 0;
  for (int64_t i = 0; i < K; ++i) {
    const F bk = beta * static_cast<F>(k[i]), qi = q[i];
    F* Si = S + i * V;
    for (int64_t j = 0; j < V; ++j) {
      Si[j] += bk * u[j];
      acc[j] += Si[j] * qi;
    }
  }
  for (int64_t j = 0; j < V; ++j) o[j] = static_cast<float>(acc[j]);
}

template <typename F>
void run(const KdaInputs& in, KdaShape s, float* S, float* o) {
  const int64_t H = s.H, K = s.K, V = s.V;
  parallel_for(H, H > 1, [&](int64_t h) {
    // fp32 updates the state in place; the double reference works on a widened copy.
    constexpr bool kInPlace = std::is_same_v<F, float>;
    F* Sh = kInPlace ? reinterpret_cast<F*>(S + h * K * V)
                     : thread_scratch<F, struct KdaStateTag>(static_cast<size_t>(K * V));
    F* u = thread_scratch<F, struct KdaUTag>(static_cast<size_t>(2 * V));  // u, then o's sums
    if (!kInPlace)
      for (int64_t i = 0; i < K * V; ++i) Sh[i] = S[h * K * V + i];
    for (int64_t t = 0; t < s.T; ++t) {
      const int64_t th = t * H + h;
      delta_step<F>(in.q + th * K, in.k + th * K, in.v + th * V, in.g + th * K, in.beta[th], K, V,
                    Sh, u, o + th * V);
    }
    if (!kInPlace)
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
