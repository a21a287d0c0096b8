// The training optimiser on plain fp32 buffers (spec §8): Muon for hidden matrices, AdamW for
// the rest (param_groups.h), decoupled weight decay, clipping by global norm and gradient
// accumulation. The caller owns the value and gradient buffers; the optimiser owns its moments.
//
//   std::vector<Param> ps = ...;                       // one per tensor, grads summed by backward
//   Optimizer opt(ps, OptimizerConfig{});
//   for each step: zero_grads(ps); for each micro-batch: backward adds into grad;
//                  scale_grads(ps, 1.0f / micro_batches);   // accumulation = mean
//                  float norm = clip_grad_norm(ps, 1.0f);
//                  opt.step(schedule.at(step));
//
// AdamW (PyTorch's): m <- b1 m + (1-b1) g, v <- b2 v + (1-b2) g², w <- w (1 - lr wd)
//   - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
// Muon (Moonlight's): m <- mu m + g, u = g + mu m (Nesterov) or m, O = NS(u) per matrix or per
//   head block, w <- w (1 - lr wd) - lr * rms_scale * sqrt(max(rows, cols)) * O, where rows and
//   cols are the block's; rms_scale 0.2 matches AdamW's update RMS so one lr serves both.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "k3/hparams.h"
#include "train/newton_schulz.h"
#include "train/param_groups.h"

namespace k3::train {

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  float* value = nullptr;  // [numel]
  float* grad = nullptr;   // [numel]
  ParamGroup group;
  int64_t numel() const;
};

struct OptimizerConfig {
  float adam_beta1 = 0.9f, adam_beta2 = 0.95f, adam_eps = 1e-8f;
  float weight_decay = 0.1f;
  float muon_momentum = 0.95f;
  bool muon_nesterov = true;
  int ns_steps = 5;
  float muon_rms_scale = 0.2f;
};

// One matrix (a Muon parameter, or one head block of it) for Newton–Schulz: out = NS(in).
struct NsBlock {
  const float* in;  // [rows, cols]
  float* out;       // [rows, cols]
  int64_t rows, cols;
};
// Runs Newton–Schulz on every block of a step (steps and coefficients as given). The default
// runs newton_schulz on the host, blocks side by side over the pool's threads; the GPU trainer
// sets one that runs them on the device.
using Orthogonalizer = std::function<void(std::span<const NsBlock>, int steps, NsCoefficients)>;
void orthogonalize_on_host(std::span<const NsBlock> blocks, int steps, NsCoefficients coef);

class Optimizer {
 public:
  Optimizer(std::vector<Param> params, OptimizerConfig config);
  // One update of every non-frozen parameter at learning rate lr.
  void step(float lr);
  int64_t steps_taken() const { return step_; }
  const std::vector<Param>& params() const { return params_; }
  // Moments, for checkpoints: first[i] is m (AdamW and Muon), second[i] is v (AdamW; empty else).
  std::vector<std::vector<float>>& first_moments() { return m_; }
  std::vector<std::vector<float>>& second_moments() { return v_; }
  void set_steps_taken(int64_t s) { step_ = s; }
  void set_orthogonalizer(Orthogonalizer o) { ortho_ = std::move(o); }

 private:
  void adamw(size_t i, float lr);
  void muon_step(float lr);
  std::vector<float> muon_input(size_t i);  // momentum update; the matrix to orthogonalise
  std::vector<Param> params_;
  OptimizerConfig cfg_;
  std::vector<std::vector<float>> m_, v_;
  int64_t step_ = 0;
  Orthogonalizer ortho_ = orthogonalize_on_host;
};

// Sets each tensor's group from the config by its checkpoint name (param_group), e.g. for the
// fp32 master copies of a checkpoint; throws k3::Error naming a tensor the config lacks or a
// Muon tensor that is not a matrix.
void assign_groups(std::vector<Param>& params, const HParams& hp, bool per_head_muon);

// The gradient passes below run over the pool's threads in pieces fixed by the shapes alone, so
// their results do not depend on the thread count.
// sqrt of the sum of every gradient element squared (in double), over all non-frozen params.
double grad_global_norm(std::span<const Param> params);
// Scales every gradient by max_norm / norm when the global norm exceeds max_norm (max_norm <= 0
// disables clipping). Returns the norm before clipping.
double clip_grad_norm(std::span<const Param> params, double max_norm);
// scale_grads(factor) then clip_grad_norm(max_norm), the first two in one pass over the
// gradients (the same bits). Returns the norm before clipping.
double scale_grads_and_clip(std::span<const Param> params, float factor, double max_norm);
// clip_grad_norm's second half, for a norm already taken; throws k3::Error if it is not finite.
double clip_to_norm(std::span<const Param> params, double norm, double max_norm);
void scale_grads(std::span<const Param> params, float factor);
void zero_grads(std::span<const Param> params);

}  // namespace k3::train
