// The device copies of the parameters and gradients, and the small helpers every device
// sublayer uses (linear layers and RMS norms over a batch of rows).
#if defined(K3_HAVE_CUDA)
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "train/cuda/gpu_layers.h"

namespace k3::train::gpu {

GpuParams::GpuParams(const ParamSet& like) {
  int64_t total = 0;
  for (const auto& [name, p] : like.all()) {
    Slot s;
    s.offset = total;
    s.cols = p.shape.empty() ? 1 : p.shape.back();
    for (size_t i = 0; i + 1 < p.shape.size(); ++i) s.rows *= p.shape[i];
    check(s.rows * s.cols == static_cast<int64_t>(p.value.size()), "training on the GPU: ", name,
          " holds ", p.value.size(), " values for its shape");
    slots_[name] = s;
    total += static_cast<int64_t>(p.value.size());
  }
  values_ = DevBuf(total);
  grads_ = DevBuf(total);
  staging_ = PinnedBuf(total);
}

void GpuParams::upload(const ParamSet& values) {
  for (const auto& [name, s] : slots_) {
    const auto it = values.all().find(name);
    check(it != values.all().end() && it->second.value.size() == size_t(s.rows * s.cols),
          "training on the GPU: the parameters changed layout at ", name);
    std::memcpy(staging_.data() + s.offset, it->second.value.data(),
                it->second.value.size() * sizeof(float));
  }
  to_dev(values_.data(), staging_.data(), values_.bytes());
}

void GpuParams::zero_grads() { dev_zero(grads_.data(), grads_.bytes()); }

void GpuParams::add_grads_into(ParamSet& grads) {
  to_host(staging_.data(), grads_.data(), grads_.bytes());
  for (const auto& [name, s] : slots_) {
    float* g = grads[name];
    const float* src = staging_.data() + s.offset;
    for (int64_t i = 0; i < s.rows * s.cols; ++i) g[i] += src[i];
  }
}

GWeight GpuParams::get(const std::string& name) const {
  const auto it = slots_.find(name);
  check(it != slots_.end(), "training: the checkpoint has no tensor ", name);
  const Slot& s = it->second;
  return {values_.data() + s.offset, const_cast<float*>(grads_.data()) + s.offset, s.rows, s.cols};
}

DevBuf lin(const DevBuf& x, int64_t N, const GWeight& w) {
  check(x.size() == N * w.cols, "training linear (GPU): input is not [N, cols]");
  DevBuf y(N * w.rows, false);
  linear_fwd(x.data(), N, w.w, w.rows, w.cols, y.data());
  return y;
}

void lin_back(const DevBuf& x, int64_t N, const GWeight& w, const DevBuf& dy, DevBuf* dx) {
  linear_bwd(x.data(), N, w.w, w.rows, w.cols, dy.data(), dx ? dx->data() : nullptr, w.g);
}

DevBuf rms(const DevBuf& x, int64_t n, const GWeight& w, float eps) {
  DevBuf y(x.size(), false);
  rms_norm_fwd(x.data(), x.size() / n, n, w.w, eps, y.data());
  return y;
}

void rms_back(const DevBuf& x, int64_t n, const GWeight& w, float eps, const DevBuf& dy,
              DevBuf& dx) {
  rms_norm_bwd(x.data(), x.size() / n, n, w.w, eps, dy.data(), dx.data(), w.g);
}

}  // namespace k3::train::gpu
#endif  // K3_HAVE_CUDA
