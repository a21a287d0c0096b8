#include "sample/util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace k3::test {
namespace fs = std::filesystem;

// A c1_tiny-shaped model (4 layers KKKM, d 32, 4 experts) with the project tokenizer's vocab.
constexpr const char* kTinyConfig = R"({
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

std::string tokenizer_dir() { return std::string(K3_SOURCE_DIR) + "/tests/data/tokenizer"; }

const std::string& tiny_model_dir() {
  static const TempDir dir;
  static const std::string path = [] {
    const std::string model = dir.file("model");
    const std::string config = dir.write("config.json", kTinyConfig);
    CliResult r = run_k3({"init", "--config", config, "-o", model, "--seed", "7"});
    if (r.exit_code != 0) throw std::runtime_error("k3 init failed: " + r.err);
    for (const char* f : {"tiktoken.model", "tokenizer_config.json"}) {
      fs::copy_file(tokenizer_dir() + "/" + f, model + "/" + f);
    }
    return model;
  }();
  return path;
}

const Model& tiny_model() {
  static const std::unique_ptr<Model> model = Model::load(tiny_model_dir());
  return *model;
}

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tok = Tokenizer::load(tiny_model_dir());
  return tok;
}

}  // namespace k3::test
