#include "ops/kda/kda_gate.h"

#include <cmath>

#include "backend/cuda/launchers.h"
#include "core/fast_math.h"
#include "core/parallel.h"

namespace k3 {

void kda_gate(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s, float* g) {
  const int64_t H = s.H, K = s.K;
  parallel_for(s.T * H, s.T * H * K > (int64_t{1} << 15), [&](int64_t th) {
    const int64_t h = th % H;
    const float a = std::exp(A_log[h]);
    const int64_t row = th * K;  // (t * H + h) * K
    for (int64_t i = 0; i < K; ++i)
      g[row + i] = s.lower_bound * sigmoid_fast(a * (f[row + i] + dt_bias[h * K + i]));
  });
}

void kda_gate_ref(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s,
                  float* g) {
  for (int64_t t = 0; t < s.T; ++t) {
    for (int64_t h = 0; h < s.H; ++h) {
      const double a = std::exp(double(A_log[h]));
      for (int64_t i = 0; i < s.K; ++i) {
        const int64_t j = (t * s.H + h) * s.K + i;
        const double x = a * (double(f[j]) + dt_bias[h * s.K + i]);
        g[j] = static_cast<float>(s.lower_bound / (1.0 + std::exp(-x)));
      }
    }
  }
}

const OpTable<KdaGateFn, KdaGateBwdFn> kKdaGateOp =
    register_op<KdaGateFn, KdaGateBwdFn>({.name = "kda_gate",
                                          .ref = kda_gate_ref,
                                          .cpu = kda_gate,
                                          .cuda = K3_CUDA_IMPL(kda_gate_cuda),
                                          .bwd = kda_gate_bwd});

}  // namespace k3
