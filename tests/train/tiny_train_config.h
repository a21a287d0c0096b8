// The tiny all-feature K3 of the whole-model training tests: KDA + MLA 3:1, two AttnRes blocks
// of two layers, LatentMoE (4 experts, top-2, scale 1.5) with a shared expert, SiTU-GLU, a
// dense first layer; vocabulary 96.
#pragma once

#include <string>

namespace k3::test {

inline constexpr const char* kTinyTrainConfig = R"({
  "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
  "bos_token_id": 93, "eos_token_id": 94, "pad_token_id": 95, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "text_config": {
    "model_type": "kimi_linear", "vocab_size": 96, "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 2,
    "hidden_act": "situ", "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 4096,
    "q_lora_rank": 16, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
    "v_head_dim": 8, "mla_use_nope": true, "mla_use_output_gate": true, "num_experts": 4,
    "num_experts_per_token": 2, "num_shared_experts": 1, "moe_intermediate_size": 32,
    "routed_expert_hidden_size": 32, "latent_moe_use_norm": true,
    "moe_router_activation_func": "sigmoid", "moe_renormalize": true,
    "routed_scaling_factor": 1.5, "use_grouped_topk": true, "num_expert_group": 1,
    "topk_group": 1, "topk_method": "noaux_tc", "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "num_nextn_predict_layers": 0, "attn_res_block_size": 2,
    "linear_attn_config": {"num_heads": 2, "head_dim": 8, "short_conv_kernel_size": 4,
      "gate_lower_bound": -5.0, "use_full_rank_gate": true, "full_attn_layers": [4],
      "kda_layers": [1, 2, 3]},
    "bos_token_id": 93, "eos_token_id": 94, "pad_token_id": 95
  }
})";

// The same model with a 512-id vocabulary, for a byte-level tokenizer (256 ranks + 256
// specials) in the CLI runs.
inline std::string tiny_byte_level_train_config() {
  std::string c = kTinyTrainConfig;
  auto replace_all = [&c](const std::string& from, const std::string& to) {
    for (size_t at = c.find(from); at != std::string::npos; at = c.find(from, at + to.size()))
      c.replace(at, from.size(), to);
  };
  replace_all("\"vocab_size\": 96", "\"vocab_size\": 512");
  replace_all("\"bos_token_id\": 93", "\"bos_token_id\": 256");
  replace_all("\"eos_token_id\": 94", "\"eos_token_id\": 257");
  replace_all("\"pad_token_id\": 95", "\"pad_token_id\": 258");
  return c;
}

}  // namespace k3::test
