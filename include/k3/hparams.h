// Typed, validated model hyper-parameters (a leaf module: the loader, the model, the cost
// tables and the tools all use it, and it depends on nothing), read from the official
// top-level config.json
// (`text_config` + `linear_attn_config` + `quantization_config`). Validation lives in one place:
// hparams_from_json() reports the first inconsistent field by its JSON path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace k3 {

enum class AttnKind { kda, mla };
enum class ExpertFormat { bf16, mxfp4 };

struct KdaHParams {
  int64_t n_head = 0;       // linear_attn_config.num_heads
  int64_t head_dim = 0;     // d_k = d_v
  int64_t conv_kernel = 4;  // short_conv_kernel_size
  float gate_lower_bound = -5.0f;
  int64_t proj_dim() const { return n_head * head_dim; }  // P = H*K
};

struct MlaHParams {
  int64_t n_head = 0;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope = 0;
  int64_t qk_rope = 0;
  int64_t v_head = 0;
  int64_t qk_head() const { return qk_nope + qk_rope; }
  int64_t cache_width() const { return kv_lora_rank + qk_rope; }  // latent cache scalars/token
};

struct MoeHParams {
  int64_t n_expert = 0;
  int64_t n_used = 0;         // top-k
  int64_t n_shared = 0;       // shared experts, fused into one FFN of width n_shared*d_expert
  int64_t d_expert = 0;       // moe_intermediate_size
  int64_t d_latent = 0;       // routed_expert_hidden_size (LatentMoE latent width)
  bool renormalize = true;    // moe_renormalize (applies only when n_used > 1)
  float routed_scale = 1.0f;  // routed_scaling_factor
  int64_t first_dense = 1;    // first_k_dense_replace
  int64_t layer_freq = 1;     // moe_layer_freq
  ExpertFormat expert_format = ExpertFormat::bf16;
};

struct HParams {
  int64_t vocab = 0;
  int64_t d_model = 0;
  int64_t d_ff = 0;  // dense FFN width (intermediate_size)
  int64_t n_layer = 0;
  // num_nextn_predict_layers (0 or 1): the multi-token prediction head, trained by `k3 train`
  // and ignored by inference; its tensors are `layers.{n_layer}.*` (docs/TRAINING.md).
  int64_t n_mtp = 0;
  int64_t attn_res_block = 0;
  int64_t max_positions = 0;
  float rms_eps = 1e-5f;
  float mla_lora_eps = 1e-6f;  // q_a/kv_a layernorms use the class default (spec §0.1)
  float situ_beta = 4.0f;
  float situ_linear_beta = 25.0f;
  int64_t bos_id = -1, eos_id = -1, pad_id = -1;
  KdaHParams kda;
  MlaHParams mla;
  MoeHParams moe;
  std::vector<AttnKind> attn_kind;  // per layer, 0-based

  bool is_moe_layer(int64_t l) const {
    return moe.n_expert > 0 && l >= moe.first_dense && l % moe.layer_freq == 0;
  }
  bool seals_slot(int64_t l) const { return l % attn_res_block == 0; }
  // The MTP layer's FFN is a LatentMoE whenever the model has experts (else dense SiTU-GLU).
  bool mtp_is_moe() const { return n_mtp > 0 && moe.n_expert > 0; }
  int64_t n_layers_of(AttnKind k) const;
};

// Reads and validates a config.json (throws k3::Error naming the field at fault).
HParams hparams_from_file(const std::string& config_path);

}  // namespace k3
