#include <cmath>
#include <type_traits>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/cpu_isa.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "ops/kda/kda.h"
#include "ops/kda/kda_step_kernels.h"

namespace k3 {
namespace {

// One head, one token. S [K, V] row-major; u, w [V] scratch. Two passes over S: the decay
// fused with u = v − S̄ᵀ k, then the update fused with o = Sᵀ q (each element sees the same
// operations in the same order as four separate passes would).
template <typename F>
void delta_step(const float* q, const float* k, const float* v, const float* g, float beta,
                int64_t K, int64_t V, F* S, F* u, F* w, float* o) {
  for (int64_t j = 0; j < V; ++j) u[j] = v[j];
  for (int64_t i = 0; i < K; ++i) {  // S̄ = diag(e^g) S; u −= S̄ᵀ k
    const F a = std::exp(static_cast<F>(g[i])), ki = k[i];
    F* Si = S + i * V;
    for (int64_t j = 0; j < V; ++j) {
      Si[j] *= a;
      u[j] -= Si[j] * ki;
    }
  }
  for (int64_t j = 0; j < V; ++j) w[j] = 0;
  for (int64_t i = 0; i < K; ++i) {  // S = S̄ + β k uᵀ; o = Sᵀ q
    const F bk = beta * static_cast<F>(k[i]), qi = q[i];
    F* Si = S + i * V;
    for (int64_t j = 0; j < V; ++j) {
      Si[j] += bk * u[j];
      w[j] += Si[j] * qi;
    }
  }
  for (int64_t j = 0; j < V; ++j) o[j] = static_cast<float>(w[j]);
}

// The fp32 step on the SIMD kernel where there is one for V (decays exponentiated here, with
// the same std::exp), else the portable one.
void step_f32(const KdaStepKernels* simd, const float* q, const float* k, const float* v,
              const float* g, float beta, int64_t K, int64_t V, float* S, float* u, float* w,
              float* o) {
  if (simd != nullptr) {
    float* decay = thread_scratch<float, struct KdaDecayTag>(static_cast<size_t>(K));
    for (int64_t i = 0; i < K; ++i) decay[i] = std::exp(g[i]);
    if (simd->step(q, k, v, decay, beta, K, V, S, o)) return;
  }
  delta_step<float>(q, k, v, g, beta, K, V, S, u, w, o);
}

template <typename F>
void run(const KdaInputs& in, KdaShape s, float* S, float* o) {
  const int64_t H = s.H, K = s.K, V = s.V;
  const KdaStepKernels* simd =
      isa_pick<const KdaStepKernels>(nullptr, nullptr, &avx512::kKdaStepKernels);
  parallel_for(H, H > 1, [&](int64_t h) {
    F* u = thread_scratch<F, struct KdaUTag>(static_cast<size_t>(V));
    F* w = thread_scratch<F, struct KdaWTag>(static_cast<size_t>(V));
    F* Sh = nullptr;
    if constexpr (std::is_same_v<F, float>) {
      Sh = S + h * K * V;  // updated in place
    } else {
      Sh = thread_scratch<F, struct KdaStateTag>(static_cast<size_t>(K * V));
      for (int64_t i = 0; i < K * V; ++i) Sh[i] = S[h * K * V + i];
    }
    for (int64_t t = 0; t < s.T; ++t) {
      const int64_t th = t * H + h;
      if constexpr (std::is_same_v<F, float>) {
        step_f32(simd, in.q + th * K, in.k + th * K, in.v + th * V, in.g + th * K, in.beta[th], K,
                 V, Sh, u, w, o + th * V);
      } else {
        delta_step<F>(in.q + th * K, in.k + th * K, in.v + th * V, in.g + th * K, in.beta[th], K, V,
                      Sh, u, w, o + th * V);
      }
    }
    if constexpr (!std::is_same_v<F, float>) {
      for (int64_t i = 0; i < K * V; ++i) S[h * K * V + i] = static_cast<float>(Sh[i]);
    }
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
