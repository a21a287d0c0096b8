// Element-wise fp32 ops over n contiguous values. The cpu versions use exactly the float
// expressions the model used inline before it called ops, so its golden numbers hold:
//   sigmoid      y = 1 / (1 + e^-x)               (KDA β)                   y may alias x
//   scale        y = x · s                        (KDA q scaling)           y may alias x
//   add          y = a + b                        (residual adds)           y may alias a or b
//   mul_sigmoid  y = x · σ(gate)                  (MLA/KDA output gates)    y may alias x
#pragma once

#include <cstdint>

#include "ops/registry.h"

namespace k3 {

// x [n] -> y [n].
using SigmoidFn = void(const float* x, int64_t n, float* y);
using ScaleFn = void(const float* x, int64_t n, float s, float* y);
// a [n], b [n] -> y [n].
using AddFn = void(const float* a, const float* b, int64_t n, float* y);
// x [n], gate [n] -> y [n].
using MulSigmoidFn = void(const float* x, const float* gate, int64_t n, float* y);

// Backwards (elementwise_bwd.cpp), adding input gradients given dy [n].
using SigmoidBwdFn = void(const float* x, int64_t n, const float* dy, float* dx);
using ScaleBwdFn = void(int64_t n, float s, const float* dy, float* dx);
using AddBwdFn = void(int64_t n, const float* dy, float* da, float* db);
using MulSigmoidBwdFn = void(const float* x, const float* gate, int64_t n, const float* dy,
                             float* dx, float* dgate);

extern const OpTable<SigmoidFn, SigmoidBwdFn> kSigmoidOp;           // "sigmoid"
extern const OpTable<ScaleFn, ScaleBwdFn> kScaleOp;                 // "scale"
extern const OpTable<AddFn, AddBwdFn> kAddOp;                       // "add"
extern const OpTable<MulSigmoidFn, MulSigmoidBwdFn> kMulSigmoidOp;  // "mul_sigmoid"

void sigmoid_bwd(const float* x, int64_t n, const float* dy, float* dx);
void scale_bwd(int64_t n, float s, const float* dy, float* dx);
void add_bwd(int64_t n, const float* dy, float* da, float* db);
void mul_sigmoid_bwd(const float* x, const float* gate, int64_t n, const float* dy, float* dx,
                     float* dgate);

void sigmoid_f32(const float* x, int64_t n, float* y);
void scale_f32(const float* x, int64_t n, float s, float* y);
void add_f32(const float* a, const float* b, int64_t n, float* y);
void mul_sigmoid_f32(const float* x, const float* gate, int64_t n, float* y);

// Plain references in double.
void sigmoid_ref(const float* x, int64_t n, float* y);
void scale_ref(const float* x, int64_t n, float s, float* y);
void add_ref(const float* a, const float* b, int64_t n, float* y);
void mul_sigmoid_ref(const float* x, const float* gate, int64_t n, float* y);

}  // namespace k3
