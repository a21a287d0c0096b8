#include "train/model_balance.h"

#include <cmath>
#include <utility>

#include "k3/error.h"

namespace k3::train {

std::vector<int64_t> moe_layers(const HParams& hp) {
  std::vector<int64_t> out;
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    if (hp.is_moe_layer(l)) out.push_back(l);
  }
  if (hp.mtp_is_moe()) out.push_back(hp.n_layer);
  return out;
}

std::string ModelBalancer::bias_name(int64_t layer) {
  return "language_model.model.layers." + std::to_string(layer) +
         ".block_sparse_moe.gate.e_score_correction_bias";
}

ModelBalancer::ModelBalancer(const HParams& hp, const ParamSet& params,
                             balance::BalancerConfig config)
    : experts_(hp.moe.n_expert), slot_(static_cast<size_t>(hp.n_layer + hp.n_mtp), -1) {
  config.top_k = hp.moe.n_used;
  for (int64_t l : moe_layers(hp)) {
    slot_[static_cast<size_t>(l)] = static_cast<int64_t>(balancers_.size());
    moe_layers_.push_back(l);
    balancers_.emplace_back(experts_, config);
    const float* b = params[bias_name(l)];
    balancers_.back().set_bias(std::vector<double>(b, b + experts_));
  }
}

std::function<void(int64_t, const float*, int64_t)> ModelBalancer::hook() {
  return [this](int64_t layer, const float* logits, int64_t tokens) {
    observe(layer, logits, tokens);
  };
}

void ModelBalancer::observe(int64_t layer, const float* logits, int64_t tokens) {
  check(layer >= 0 && layer < static_cast<int64_t>(slot_.size()) && slot_[size_t(layer)] >= 0,
        "router balancing: layer ", layer, " has no router");
  scores_.resize(static_cast<size_t>(tokens * experts_));
  for (size_t i = 0; i < scores_.size(); ++i) scores_[i] = 1.0f / (1.0f + std::exp(-logits[i]));
  balancers_[size_t(slot_[size_t(layer)])].observe(scores_, tokens);
}

BalanceStepStats ModelBalancer::finish_step(ParamSet& params) {
  BalanceStepStats st;
  for (size_t i = 0; i < balancers_.size(); ++i) {
    const balance::StepStats s = balancers_[i].finish_step();
    st.layers.push_back(moe_layers_[i]);
    st.max_vio.push_back(s.max_vio);
    st.worst = std::max(st.worst, s.max_vio);
    st.mean += s.max_vio / static_cast<double>(balancers_.size());
    float* b = params[bias_name(moe_layers_[i])];
    const std::vector<double>& nb = balancers_[i].bias();
    for (int64_t e = 0; e < experts_; ++e) b[e] = static_cast<float>(nb[size_t(e)]);
  }
  return st;
}

balance::RouterBalancer& ModelBalancer::layer(int64_t l) {
  return const_cast<balance::RouterBalancer&>(std::as_const(*this).layer(l));
}

const balance::RouterBalancer& ModelBalancer::layer(int64_t l) const {
  check(l >= 0 && l < static_cast<int64_t>(slot_.size()) && slot_[size_t(l)] >= 0,
        "router balancing: layer ", l, " has no router");
  return balancers_[size_t(slot_[size_t(l)])];
}

}  // namespace k3::train
