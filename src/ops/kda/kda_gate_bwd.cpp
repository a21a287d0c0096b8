// Backward of g = L · σ(x), x = e^{A_log[h]} · (f + dt_bias[h]):
//   dx = dg · L σ(x)(1 − σ(x));  df = dx · e^A;  ddt_bias += dx · e^A;  dA_log += dx · x.
#include <cmath>

#include "ops/kda/kda_gate.h"

namespace k3 {

void kda_gate_bwd(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s,
                  const float* dg, float* df, float* dA_log, float* ddt_bias) {
  const int64_t H = s.H, K = s.K;
  for (int64_t h = 0; h < H; ++h) {
    const double a = std::exp(double(A_log[h]));
    double dA = 0;
    for (int64_t i = 0; i < K; ++i) {
      double ddt = 0;
      for (int64_t t = 0; t < s.T; ++t) {
        const int64_t j = (t * H + h) * K + i;
        const double x = a * (double(f[j]) + dt_bias[h * K + i]);
        const double sg = 1.0 / (1.0 + std::exp(-x));
        const double dx = dg[j] * s.lower_bound * sg * (1.0 - sg);
        if (df != nullptr) df[j] += static_cast<float>(dx * a);
        ddt += dx * a;
        dA += dx * x;
      }
      if (ddt_bias != nullptr) ddt_bias[h * K + i] += static_cast<float>(ddt);
    }
    if (dA_log != nullptr) dA_log[h] += static_cast<float>(dA);
  }
}

}  // namespace k3
