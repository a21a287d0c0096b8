// RMS norms (spec §0.1), in fp32.
//   rms_norm:        y = w ⊙ x / sqrt(mean(x²) + eps)
//   gated_rms_norm:  y = w ⊙ x / sqrt(mean(x²) + eps) ⊙ σ(z)     (KDA o_norm, FLA
//   FusedRMSNormGated)
// Both work on `rows` independent vectors of length n; w has length n.
#pragma once

#include <cstdint>

namespace k3 {

void rms_norm(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y);
void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                    float eps, float* y);
// x / sqrt(sum(x²) + eps) per row (KDA q/k normalisation; eps inside the square root).
void l2_norm(float* x, int64_t rows, int64_t n, float eps);

}  // namespace k3
