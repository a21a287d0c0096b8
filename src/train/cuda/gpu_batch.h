// The training pass on the GPU (`k3 train --device cuda`): the windows of an optimiser step run
// through the whole model on the device, a pass of up to `pass_windows` windows at a time
// (rows b·T + t), and their gradients are summed there and added into the host's gradient
// buffers once per step; the optimiser, the router balancer and the checkpoints stay on the
// host. The maths is the CPU pass's (train/model_train.h) in fp32; KDA runs the recurrent
// form (states kept per token), MLA the expanded one. The sums over windows run in another
// order than the CPU's, so a GPU step matches a CPU step to fp32 rounding, not bit for bit;
// GPU steps repeat bit for bit (no float atomics), so a GPU run resumes bit-exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "k3/hparams.h"
#include "train/model_train.h"
#include "train/optimizer.h"
#include "train/params.h"
#include "train/train_data.h"
#include "train/window_batch.h"

namespace k3::train {

bool gpu_training_available();  // built with CUDA and a device is usable

// An Orthogonalizer (train/optimizer.h) that runs Muon's Newton–Schulz on the device: the
// blocks of one shape as one batch (gpu_ns.cpp). fp32 like the host's, with its products in
// another order, so it matches the host's to rounding; it repeats bit for bit.
void orthogonalize_on_device(std::span<const NsBlock> blocks, int steps, NsCoefficients coef);

class GpuBatch {
 public:
  // Throws k3::Error when there is no usable device, or for a model the device pass does not
  // cover yet (a multi-token prediction head).
  GpuBatch(const HParams& hp, const ParamSet& like, int64_t pass_windows);
  ~GpuBatch();
  GpuBatch(const GpuBatch&) = delete;
  GpuBatch& operator=(const GpuBatch&) = delete;
  // As WindowBatch::run: grads += Σ_i ∂loss_i/∂θ over `windows` (all of one length), observe
  // gets every window's router logits in window order; returns Σ_i loss_i. With
  // opt.loss_only, only the losses (grads untouched).
  double run(const ParamSet& params, const std::vector<Window>& windows, ParamSet& grads,
             const RouterObserver& observe, const TrainOptions& opt = {});

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace k3::train
