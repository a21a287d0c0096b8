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

// Backwards (norm_bwd.cpp), adding the gradients of x (and z, w) given dy [rows, n].
using RmsNormBwdFn = void(const float* x, int64_t rows, int64_t n, const float* w, float eps,
                          const float* dy, float* dx, float* dw);
using GatedRmsNormBwdFn = void(const float* x, const float* z, int64_t rows, int64_t n,
                               const float* w, float eps, const float* dy, float* dx, float* dz,
                               float* dw);
using L2NormBwdFn = void(const float* x, int64_t rows, int64_t n, float eps, const float* dy,
                         float* dx);

extern const OpTable<RmsNormFn, RmsNormBwdFn> kRmsNormOp;                 // "rms_norm"
extern const OpTable<GatedRmsNormFn, GatedRmsNormBwdFn> kGatedRmsNormOp;  // "gated_rms_norm"
extern const OpTable<L2NormFn, L2NormBwdFn> kL2NormOp;                    // "l2_norm"

void rms_norm_bwd(const float* x, int64_t rows, int64_t n, const float* w, float eps,
                  const float* dy, float* dx, float* dw);
void gated_rms_norm_bwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, const float* dy, float* dx, float* dz, float* dw);
void l2_norm_bwd(const float* x, int64_t rows, int64_t n, float eps, const float* dy, float* dx);

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
