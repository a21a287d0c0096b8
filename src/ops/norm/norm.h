// RMS norms (spec §0.1), in fp32.
//   rms_norm:        y = w ⊙ x / sqrt(mean(x²) + eps)
//   gated_rms_norm:  y = w ⊙ x / sqrt(mean(x²) + eps) ⊙ σ(z)     (KDA o_norm, FLA
//   FusedRMSNormGated)
//   l2_norm:         y = x / sqrt(sum(x²) + eps)                  (KDA q/k; eps inside the root)
// All work on `rows` independent vectors of length n; w has length n; y may alias x.
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

// x [rows, n], w [n] -> y [rows, n].
using RmsNormFn = void(const float* x, int64_t rows, int64_t n, const float* w, float eps,
                       float* y);
// x, z [rows, n], w [n] -> y [rows, n].
using GatedRmsNormFn = void(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                            float eps, float* y);
// x [rows, n] -> y [rows, n].
using L2NormFn = void(const float* x, int64_t rows, int64_t n, float eps, float* y);

extern const OpTable<RmsNormFn> kRmsNormOp;            // "rms_norm"
extern const OpTable<GatedRmsNormFn> kGatedRmsNormOp;  // "gated_rms_norm"
extern const OpTable<L2NormFn> kL2NormOp;              // "l2_norm"

void rms_norm(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y);
void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                    float eps, float* y);
void l2_norm(const float* x, int64_t rows, int64_t n, float eps, float* y);
// In place: x = l2_norm(x).
void l2_norm(float* x, int64_t rows, int64_t n, float eps);

// Plain double references (the oracles; never optimised).
void rms_norm_ref(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y);
void gated_rms_norm_ref(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, float* y);
void l2_norm_ref(const float* x, int64_t rows, int64_t n, float eps, float* y);

}  // namespace k3
