#include "train/tape.h"

#include "core/error.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"

namespace k3::train {

Weight Scope::operator()(const std::string& name) const {
  const std::string full = prefix + name;
  auto it = p.all().find(full);
  check(it != p.all().end(), "training: the checkpoint has no tensor ", full);
  const std::vector<int64_t>& shape = it->second.shape;
  int64_t cols = shape.empty() ? 1 : shape.back(), rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  return {it->second.value.data(), grads[full], rows, cols, impl};
}

namespace {
Mat as_mat(const Weight& w) { return {w.rows, w.cols, MatFormat::f32, w.w, nullptr}; }
}  // namespace

Buf linear_fwd(const Buf& x, int64_t T, const Weight& w) {
  check(static_cast<int64_t>(x.size()) == T * w.cols, "training linear: input is not [T, cols]");
  Buf y = zeros(T * w.rows);
  kLinearOp.get(w.impl)(x.data(), T, as_mat(w), y.data());
  return y;
}

void linear_back(const Buf& x, int64_t T, const Weight& w, const Buf& dy, Buf* dx) {
  kLinearOp.bwd(x.data(), T, as_mat(w), dy.data(), dx ? dx->data() : nullptr, w.g);
}

Buf rms_fwd(const Buf& x, int64_t n, const Weight& w, float eps) {
  Buf y(x.size());
  kRmsNormOp.get(w.impl)(x.data(), static_cast<int64_t>(x.size()) / n, n, w.w, eps, y.data());
  return y;
}

void rms_back(const Buf& x, int64_t n, const Weight& w, float eps, const Buf& dy, Buf& dx) {
  kRmsNormOp.bwd(x.data(), static_cast<int64_t>(x.size()) / n, n, w.w, eps, dy.data(), dx.data(),
                 w.g);
}

}  // namespace k3::train
