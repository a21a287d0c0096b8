// Backward of y = x · Wᵀ on fp32 master weights: dx += dy · W and dW += dyᵀ · x, both as
// accumulate-products on the dispatched GEMM kernels (core/gemm.h; dyᵀ is read in place).
#include "core/error.h"
#include "core/gemm.h"
#include "ops/linear/linear.h"

namespace k3 {

void linear_bwd(const float* x, int64_t T, const Mat& w, const float* dy, float* dx, float* dW) {
  check(w.format == MatFormat::f32,
        "linear backward: weights must be fp32 (training keeps fp32 master weights)");
  const float* W = static_cast<const float*>(w.data);  // [R, C]
  const int64_t R = w.rows, C = w.cols;
  // dx [T, C] += dy [T, R] · W [R, C]
  if (dx != nullptr) gemm_acc(T, C, R, {dy, R, 1}, W, C, dx, C);
  // dW [R, C] += dyᵀ [R, T] · x [T, C]
  if (dW != nullptr) gemm_acc(R, C, T, {dy, 1, R}, x, C, dW, C);
}

}  // namespace k3
