// A tiny random K3 model (c1_tiny's shape: 4 layers KKKM, d 32, 4 experts) with the project
// tokenizer's vocabulary, written by `k3 init` into a test's temp directory: the model the CLI
// tests run text through. Header-only, shared by the test folders.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "common/cli_harness.h"

namespace k3::test {

inline constexpr const char* kTinyChatConfig = R"({
  "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
  "bos_token_id": 6260, "eos_token_id": 6262, "pad_token_id": 6515,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "text_config": {
    "model_type": "kimi_linear", "vocab_size": 6516, "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 2,
    "num_key_value_heads": 2, "hidden_act": "situ", "activation_situ_beta": 4.0,
    "activation_situ_linear_beta": 25.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": false,
    "max_position_embeddings": 4096, "q_lora_rank": 24, "kv_lora_rank": 16,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "mla_use_nope": true,
    "mla_use_output_gate": true, "num_experts": 4, "num_experts_per_token": 2,
    "num_shared_experts": 1, "moe_intermediate_size": 32, "routed_expert_hidden_size": 32,
    "latent_moe_use_norm": true, "moe_router_activation_func": "sigmoid",
    "moe_renormalize": true, "routed_scaling_factor": 1.0, "use_grouped_topk": true,
    "num_expert_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "num_nextn_predict_layers": 0,
    "attn_res_block_size": 2,
    "linear_attn_config": {"num_heads": 2, "head_dim": 16, "short_conv_kernel_size": 4,
      "gate_lower_bound": -5.0, "use_full_rank_gate": true, "full_attn_layers": [4],
      "kda_layers": [1, 2, 3]},
    "bos_token_id": 6260, "eos_token_id": 6262, "pad_token_id": 6515
  }
})";

// Writes the model (and the tokenizer files) to dir/model and returns its path. A larger
// max_positions gives requests room to run for longer (the server's drain test).
inline std::string make_tiny_chat_model(const TempDir& dir, int seed = 7,
                                        int64_t max_positions = 4096) {
  std::string config = kTinyChatConfig;
  const std::string key = "\"max_position_embeddings\": 4096";
  config.replace(config.find(key), key.size(),
                 "\"max_position_embeddings\": " + std::to_string(max_positions));
  const std::string model = dir.file("model");
  const CliResult r = run_k3({"init", "--config", dir.write("tiny_config.json", config), "-o",
                              model, "--seed", std::to_string(seed)});
  if (r.exit_code != 0) throw std::runtime_error("k3 init failed: " + r.err);
  for (const char* f : {"tiktoken.model", "tokenizer_config.json"}) {
    std::filesystem::copy_file(K3_SOURCE_DIR "/tests/data/tokenizer/" + std::string(f),
                               model + "/" + f);
  }
  return model;
}

}  // namespace k3::test
