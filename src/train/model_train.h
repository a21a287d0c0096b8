// The whole-model training pass (spec §2, §5.2): a forward over one sequence of T tokens that
// keeps every layer's activations, the mean next-token cross-entropy, and the backward over
// the layers into the gradient of every parameter tensor. fp32 throughout (the ops' cpu
// forwards and their bwd launchers); KDA runs the chunked form, MLA the expanded one.
// TrainOptions::forward picks the ops' forward launchers: cpu (fast, fp32 sums) for training,
// or ref (the references: double sums, fp32 results) to check the backward's maths beyond fp32
// rounding.
#pragma once

#include <cstdint>
#include <functional>

#include "k3/hparams.h"
#include "ops/registry.h"
#include "train/params.h"

namespace k3 {

struct TrainOptions {
  Impl forward = Impl::cpu;
  int64_t kda_chunk = 64;  // chunk length of KDA's chunked form
  // Called after the forward with each MoE layer's router logits [T, n_expert] (before the
  // sigmoid), for router balancing (train/model_balance.h); may be empty.
  std::function<void(int64_t layer, const float* logits, int64_t T)> router_logits = nullptr;
  bool loss_only = false;  // stop after the loss (evaluation): grads are left untouched
  // λ of the MTP head's loss (hp.n_mtp == 1, train/mtp_train.h): loss = main + λ·mtp.
  double mtp_weight = 0.3;
};

// loss = mean_t CE(logits[t], targets[t]); adds ∂loss/∂θ into grads (shaped like params).
// With an MTP head (hp.n_mtp == 1) and T >= 2, loss = that + mtp_weight · (the head's mean CE
// of targets[t+1] over t < T-1); loss_only returns the main loss alone (evaluation).
// tokens and targets [T] must lie in the vocabulary (k3::Error otherwise).
double loss_and_grads(const HParams& hp, const ParamSet& params, const int64_t* tokens,
                      const int64_t* targets, int64_t T, ParamSet& grads,
                      const TrainOptions& opt = {});

}  // namespace k3
