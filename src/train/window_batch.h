// The windows of one optimiser step run side by side: with -t N, up to N windows at once, one
// per pool thread (inside a window every op runs on its thread alone: small matrices split
// over threads pay more in hand-offs than they gain). Each window adds its gradient into a
// buffer of its own, and the buffers are summed into the step's gradient in window order
// (window 0 straight into it, then += window 1, += window 2, ...), the router logits are
// handed to the balancer in window order too: the step's result is bit-identical for every
// thread count, so a run resumes bit-exactly on any -t.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "k3/hparams.h"
#include "train/model_train.h"
#include "train/params.h"
#include "train/train_data.h"

namespace k3::train {

using RouterObserver = std::function<void(int64_t layer, const float* logits, int64_t T)>;

class WindowBatch {
 public:
  // grads += Σ_i ∂loss_i/∂θ over `windows` in order (grads zeroed by the caller); observe gets
  // every window's router logits (may be empty). Returns Σ_i loss_i.
  double run(const HParams& hp, const ParamSet& params, const std::vector<Window>& windows,
             ParamSet& grads, const RouterObserver& observe, TrainOptions opt = {});

 private:
  struct RouterLogits {
    int64_t layer, T;
    std::vector<float> logits;  // [T, n_expert]
  };
  struct Slot {
    ParamSet grads;  // this window's gradient (unused by window 0)
    std::vector<RouterLogits> logits;
    double loss = 0;
  };
  // grads += slots_[j].grads for j in [j0, j1), in that order, element by element.
  void add_into(ParamSet& grads, int64_t j0, int64_t j1);

  std::vector<Slot> slots_;  // one per window of a round, kept (grown) across steps
};

}  // namespace k3::train
