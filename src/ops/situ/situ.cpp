#include "ops/situ/situ.h"

#include <cmath>

#include "backend/cuda/launchers.h"
#include "core/cpu_isa.h"
#include "ops/situ/situ_kernels.h"

namespace k3 {

double situ_glu_ref(double a, double b, SituParams p) {
  const double gate = p.beta * std::tanh(a / p.beta) / (1.0 + std::exp(-a));
  return gate * p.linear_beta * std::tanh(b / p.linear_beta);
}

void situ_glu_ref_array(const float* gate, const float* up, int64_t n, SituParams p, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(situ_glu_ref(gate[i], up[i], p));
}

namespace {

void situ_glu_scalar(const float* gate, const float* up, int64_t n, SituParams p, float* out) {
  const float inv_b1 = 1.0f / p.beta, inv_b2 = 1.0f / p.linear_beta;
  for (int64_t i = 0; i < n; ++i) {
    const float a = gate[i], b = up[i];
    const float g = p.beta * std::tanh(a * inv_b1) / (1.0f + std::exp(-a));
    out[i] = g * (p.linear_beta * std::tanh(b * inv_b2));
  }
}

}  // namespace

void situ_glu(const float* gate, const float* up, int64_t n, SituParams p, float* out) {
  const SituKernels* k =
      isa_pick<const SituKernels>(nullptr, &avx2::kSituKernels, &avx512::kSituKernels);
  if (k == nullptr) return situ_glu_scalar(gate, up, n, p, out);
  k->situ_glu(gate, up, n, p.beta, p.linear_beta, out);
}

const OpTable<SituGluFn, SituGluBwdFn> kSituGluOp =
    register_op<SituGluFn, SituGluBwdFn>({.name = "situ_glu",
                                          .ref = situ_glu_ref_array,
                                          .cpu = situ_glu,
                                          .cuda = K3_CUDA_IMPL(situ_glu_cuda),
                                          .bwd = situ_glu_bwd});

}  // namespace k3
