// Muon's orthogonalisation on the device for `k3 train --device cuda`: the step's blocks are
// grouped by shape (in order of first appearance), each group copied over as one
// [nb, rows, cols] array, orthogonalised by newton_schulz_batch and copied back.
#include "core/error.h"
#include "train/cuda/gpu_batch.h"

#if defined(K3_HAVE_CUDA)
#include <algorithm>
#include <map>
#include <utility>

#include "train/cuda/train_ops.h"

namespace k3::train {

void orthogonalize_on_device(std::span<const NsBlock> blocks, int steps, NsCoefficients coef) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> by_shape;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::pair<int64_t, int64_t> shape{blocks[i].rows, blocks[i].cols};
    auto& members = by_shape[shape];
    if (members.empty()) shapes.push_back(shape);
    members.push_back(i);
  }
  std::vector<float> host;
  for (const auto& shape : shapes) {
    const std::vector<size_t>& members = by_shape[shape];
    const int64_t nb = static_cast<int64_t>(members.size()), count = shape.first * shape.second;
    host.resize(static_cast<size_t>(nb * count));
    for (int64_t j = 0; j < nb; ++j) {
      const NsBlock& b = blocks[members[size_t(j)]];
      std::copy(b.in, b.in + count, host.begin() + j * count);
    }
    gpu::DevBuf g(nb * count, false), out(nb * count, false);
    gpu::to_dev(g.data(), host.data(), g.bytes());
    gpu::newton_schulz_batch(g.data(), out.data(), nb, shape.first, shape.second, steps, coef.a,
                             coef.b, coef.c);
    gpu::to_host(host.data(), out.data(), out.bytes());
    for (int64_t j = 0; j < nb; ++j) {
      const NsBlock& b = blocks[members[size_t(j)]];
      std::copy(host.begin() + j * count, host.begin() + (j + 1) * count, b.out);
    }
  }
}

}  // namespace k3::train

#else   // no CUDA backend in this build

namespace k3::train {

void orthogonalize_on_device(std::span<const NsBlock>, int, NsCoefficients) {
  throw Error("Newton-Schulz on the GPU: this build has no CUDA backend");
}

}  // namespace k3::train
#endif  // K3_HAVE_CUDA
