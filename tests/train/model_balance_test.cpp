// Router balancing and the optimiser on the training model: QB fed by the training forward's
// router logits flattens the routing of a fixed batch of a tiny K3, Loss-Free moves it less and
// `none` not at all; one optimiser step over every tensor leaves the QB-owned bias alone.
#include "train/model_balance.h"

#include <gtest/gtest.h>

#include <random>

#include "common/cli_harness.h"
#include "loader/checkpoint.h"
#include "train/model_train.h"
#include "train/optimizer_params.h"

namespace k3::train {
namespace {

// A small all-feature K3 with 8 experts (top-2) in layers 1..3.
constexpr const char* kConfig = R"({
  "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
  "bos_token_id": 93, "eos_token_id": 94, "pad_token_id": 95, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "text_config": {
    "model_type": "kimi_linear", "vocab_size": 96, "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 2,
    "hidden_act": "situ", "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 4096,
    "q_lora_rank": 16, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
    "v_head_dim": 8, "mla_use_nope": true, "mla_use_output_gate": true, "num_experts": 8,
    "num_experts_per_token": 2, "num_shared_experts": 1, "moe_intermediate_size": 16,
    "routed_expert_hidden_size": 16, "latent_moe_use_norm": true,
    "moe_router_activation_func": "sigmoid", "moe_renormalize": true,
    "routed_scaling_factor": 1.0, "use_grouped_topk": true, "num_expert_group": 1,
    "topk_group": 1, "topk_method": "noaux_tc", "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "num_nextn_predict_layers": 0, "attn_res_block_size": 2,
    "linear_attn_config": {"num_heads": 2, "head_dim": 8, "short_conv_kernel_size": 4,
      "gate_lower_bound": -5.0, "use_full_rank_gate": true, "full_attn_layers": [4],
      "kda_layers": [1, 2, 3]},
    "bos_token_id": 93, "eos_token_id": 94, "pad_token_id": 95
  }
})";

struct Tiny {
  test::TempDir dir;
  std::string model;
  Tiny() {
    model = dir.file("model");
    const test::CliResult r = test::run_k3(
        {"init", "--config", dir.write("config.json", kConfig), "-o", model, "--seed", "5"});
    if (r.exit_code != 0) throw std::runtime_error("k3 init failed: " + r.err);
  }
};

// MaxVio (worst MoE layer) of the same 128 tokens over 4 balancing steps.
std::vector<double> run(balance::Method method, ParamSet* out_params = nullptr) {
  Tiny tiny;
  const Checkpoint ckpt(tiny.model);
  const HParams& hp = ckpt.hparams();
  ParamSet params = ParamSet::from_checkpoint(ckpt), grads = params.zeros_like();
  std::mt19937_64 gen(3);
  std::vector<int64_t> tokens(129);
  for (int64_t& t : tokens) t = static_cast<int64_t>(gen() % 90);
  ModelBalancer bal(hp, params, {method, 0, 1000, balance::QbConvention::paddle, 1e-3});
  TrainOptions opt;
  opt.router_logits = bal.hook();
  std::vector<double> worst;
  for (int step = 0; step < 4; ++step) {
    loss_and_grads(hp, params, tokens.data(), tokens.data() + 1, 128, grads, opt);
    const BalanceStepStats s = bal.finish_step(params);
    EXPECT_EQ(s.layers, (std::vector<int64_t>{1, 2, 3}));
    worst.push_back(s.worst);
    for (int64_t l : s.layers) {  // the parameters hold the balancer's bias
      const float* b = params[ModelBalancer::bias_name(l)];
      for (int64_t e = 0; e < 8; ++e)
        EXPECT_EQ(b[e], static_cast<float>(bal.layer(l).bias()[size_t(e)]));
    }
  }
  if (out_params) *out_params = std::move(params);
  return worst;
}

TEST(ModelBalance, QbFlattensTheRoutingOfTheTrainingForward) {
  const std::vector<double> none = run(balance::Method::none);
  const std::vector<double> qb = run(balance::Method::qb_histogram);
  const std::vector<double> lf = run(balance::Method::loss_free);
  for (double v : none) EXPECT_EQ(v, none[0]);  // nothing changes the routing
  EXPECT_GT(none[0], 0.2);                      // a random router is uneven
  EXPECT_EQ(qb[0], none[0]);                    // step 0 routes with the initial bias
  EXPECT_LT(qb.back(), none[0] / 2);
  EXPECT_LT(qb.back(), lf.back());  // Loss-Free's 1e-3 steps barely move it in 4 steps
}

TEST(ModelBalance, OptimiserStepsEveryTensorButTheBias) {
  Tiny tiny;
  const Checkpoint ckpt(tiny.model);
  const HParams& hp = ckpt.hparams();
  ParamSet params = ParamSet::from_checkpoint(ckpt), grads = params.zeros_like();
  std::vector<int64_t> tokens(33);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int64_t(i * 7 % 90);
  loss_and_grads(hp, params, tokens.data(), tokens.data() + 1, 32, grads);
  const ParamSet before = params;
  std::vector<Param> ps = optimizer_params(params, grads, hp, true);
  const double norm = clip_grad_norm(ps, 1.0);
  EXPECT_GT(norm, 0);
  Optimizer opt(ps, OptimizerConfig{});
  opt.step(1e-3f);
  int moved = 0, frozen = 0;
  for (const Param& p : opt.params()) {
    const float* b = before[p.name];
    bool changed = false;
    for (int64_t i = 0; i < p.numel(); ++i) changed |= p.value[i] != b[i];
    if (p.group.update == Update::frozen) {
      EXPECT_FALSE(changed) << p.name;
      ++frozen;
    } else {
      moved += changed;
    }
  }
  EXPECT_EQ(frozen, 3);  // one router bias per MoE layer
  EXPECT_GT(moved, static_cast<int>(ps.size()) / 2);
}

}  // namespace
}  // namespace k3::train
