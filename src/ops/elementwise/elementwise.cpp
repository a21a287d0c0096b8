#include "ops/elementwise/elementwise.h"

#include <cmath>

#include "backend/cuda/launchers.h"
#include "core/fast_math.h"
#include "core/parallel.h"

namespace k3 {
namespace {

// Below this a fork/join costs more than the loop (decode-sized vectors stay serial).
constexpr int64_t kParallelMin = int64_t{1} << 15;

double sigmoid_d(double v) { return 1.0 / (1.0 + std::exp(-v)); }

}  // namespace

void sigmoid_f32(const float* x, int64_t n, float* y) {
  parallel_for(n, n > kParallelMin, [&](int64_t i) { y[i] = sigmoid_fast(x[i]); });
}

void scale_f32(const float* x, int64_t n, float s, float* y) {
  parallel_for(n, n > kParallelMin, [&](int64_t i) { y[i] = x[i] * s; });
}

void add_f32(const float* a, const float* b, int64_t n, float* y) {
  parallel_for(n, n > kParallelMin, [&](int64_t i) { y[i] = a[i] + b[i]; });
}

void mul_sigmoid_f32(const float* x, const float* gate, int64_t n, float* y) {
  parallel_for(n, n > kParallelMin, [&](int64_t i) { y[i] = x[i] * sigmoid_fast(gate[i]); });
}

void sigmoid_ref(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(sigmoid_d(x[i]));
}

void scale_ref(const float* x, int64_t n, float s, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(double(x[i]) * s);
}

void add_ref(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(double(a[i]) + b[i]);
}

void mul_sigmoid_ref(const float* x, const float* gate, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i] * sigmoid_d(gate[i]));
}

const OpTable<SigmoidFn, SigmoidBwdFn> kSigmoidOp =
    register_op<SigmoidFn, SigmoidBwdFn>({.name = "sigmoid",
                                          .ref = sigmoid_ref,
                                          .cpu = sigmoid_f32,
                                          .cuda = K3_CUDA_IMPL(sigmoid_cuda),
                                          .bwd = sigmoid_bwd});
const OpTable<ScaleFn, ScaleBwdFn> kScaleOp =
    register_op<ScaleFn, ScaleBwdFn>({.name = "scale",
                                      .ref = scale_ref,
                                      .cpu = scale_f32,
                                      .cuda = K3_CUDA_IMPL(scale_cuda),
                                      .bwd = scale_bwd});
const OpTable<AddFn, AddBwdFn> kAddOp =
    register_op<AddFn, AddBwdFn>({.name = "add",
                                  .ref = add_ref,
                                  .cpu = add_f32,
                                  .cuda = K3_CUDA_IMPL(add_cuda),
                                  .bwd = add_bwd});
const OpTable<MulSigmoidFn, MulSigmoidBwdFn> kMulSigmoidOp =
    register_op<MulSigmoidFn, MulSigmoidBwdFn>({.name = "mul_sigmoid",
                                                .ref = mul_sigmoid_ref,
                                                .cpu = mul_sigmoid_f32,
                                                .cuda = K3_CUDA_IMPL(mul_sigmoid_cuda),
                                                .bwd = mul_sigmoid_bwd});

}  // namespace k3
