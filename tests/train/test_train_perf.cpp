// Timing of one training step (forward + backward) on a small all-feature K3: disabled by
// default (timings belong in benchmarks); run with --gtest_also_run_disabled_tests
// --gtest_filter='TrainPerf.*'. Prints the model directory it used so that the PyTorch
// reference can be timed on the same weights (tests/reference/k3_torch.py --time).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "common/cli_harness.h"
#include "loader/checkpoint.h"
#include "train/model_train.h"

namespace k3::test {
namespace {

constexpr const char* kPerfConfig = R"({
  "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
  "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3, "tie_word_embeddings": false,
  "text_config": {
    "model_type": "kimi_linear", "vocab_size": 512, "hidden_size": 128, "intermediate_size": 256,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
    "hidden_act": "situ", "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 4096,
    "q_lora_rank": 64, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
    "v_head_dim": 32, "mla_use_nope": true, "mla_use_output_gate": true, "num_experts": 8,
    "num_experts_per_token": 2, "num_shared_experts": 1, "moe_intermediate_size": 64,
    "routed_expert_hidden_size": 64, "latent_moe_use_norm": true,
    "moe_router_activation_func": "sigmoid", "moe_renormalize": true,
    "routed_scaling_factor": 1.0, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "num_nextn_predict_layers": 0, "attn_res_block_size": 2,
    "linear_attn_config": {"num_heads": 4, "head_dim": 32, "short_conv_kernel_size": 4,
      "gate_lower_bound": -5.0, "full_attn_layers": [4], "kda_layers": [1, 2, 3]},
    "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3
  }
})";

TEST(TrainPerf, DISABLED_SmallModelStep) {
  TempDir dir;
  const std::string model = dir.file("model");
  const CliResult r = run_k3(
      {"init", "--config", dir.write("config.json", kPerfConfig), "-o", model, "--seed", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Checkpoint ckpt(model);
  const ParamSet params = ParamSet::from_checkpoint(ckpt);
  ParamSet grads = params.zeros_like();
  const int64_t T = 256;
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> pick(0, ckpt.hparams().vocab - 1);
  std::vector<int64_t> seq(T + 1);
  for (int64_t& t : seq) t = pick(rng);
  std::vector<double> ms;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    loss_and_grads(ckpt.hparams(), params, seq.data(), seq.data() + 1, T, grads);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin() + 1, ms.end());
  const double med = ms[2];
  std::printf("train step T=%lld: median %.1f ms, %.0f tokens/s (first %.1f ms)\n",
              static_cast<long long>(T), med, T / med * 1e3, ms[0]);
}

}  // namespace
}  // namespace k3::test
