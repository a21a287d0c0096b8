// Router balancing in the training loop: one k3::balance::RouterBalancer per MoE layer, fed the
// router logits of every micro-batch through TrainOptions::router_logits, and writing the new
// selection bias into the fp32 parameters ("…block_sparse_moe.gate.e_score_correction_bias")
// once per optimiser step. The optimiser leaves that tensor alone (param_groups.h: frozen).
//
//   ModelBalancer bal(hp, params, {Method::qb_histogram, 0, 1000});   // top_k from the config
//   TrainOptions opt; opt.router_logits = bal.hook();
//   for each micro-batch: loss_and_grads(hp, params, ..., grads, opt);
//   BalanceStepStats s = bal.finish_step(params);                   // log s.max_vio
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "k3/hparams.h"
#include "k3/router_balance.h"
#include "train/params.h"

namespace k3::train {

struct BalanceStepStats {
  std::vector<int64_t> layers;  // the MoE layers, in order
  std::vector<double> max_vio;  // per MoE layer, of the step's routing
  double worst = 0, mean = 0;   // over the MoE layers
};

// The layers with a router, in order: the main model's MoE layers, then the MTP head's
// (layer n_layer) when it is a MoE.
std::vector<int64_t> moe_layers(const HParams& hp);

class ModelBalancer {
 public:
  // The bias starts from the parameters' current values; config.top_k is taken from hp.
  ModelBalancer(const HParams& hp, const ParamSet& params, balance::BalancerConfig config);

  // For TrainOptions::router_logits: turns logits into sigmoid scores and observes them.
  std::function<void(int64_t, const float*, int64_t)> hook();
  void observe(int64_t layer, const float* logits, int64_t tokens);
  // Updates every MoE layer's bias (by the method) and writes it into `params`.
  BalanceStepStats finish_step(ParamSet& params);
  const balance::RouterBalancer& layer(int64_t l) const;
  balance::RouterBalancer& layer(int64_t l);  // e.g. to restore a resumed run's float64 bias

  static std::string bias_name(int64_t layer);

 private:
  int64_t experts_;
  std::vector<int64_t> moe_layers_;
  std::vector<int64_t> slot_;  // [n_layer + n_mtp] index into balancers_, -1 for dense layers
  std::vector<balance::RouterBalancer> balancers_;
  std::vector<float> scores_;
};

}  // namespace k3::train
