// The weight table, public view: every tensor a config implies (spec §9.2), with its official
// shape, component and logical parameter count. It is the same table the loader validates
// against, the engine binds from, `k3 init` writes and `k3 inspect` reports; `k3 cost` sums it.
//
//   int64_t kda = 0;
//   for (const k3::WeightEntry& w : k3::weight_table(hp))
//     if (w.role == "kda attention") kda += w.params;
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "k3/hparams.h"

namespace k3 {

// What a tensor is, independent of its checkpoint name. Per-layer slots come with a layer index,
// routed-expert slots with a layer and an expert index.
enum class WeightSlot : uint8_t {
  // model level
  embed,
  lm_head,
  final_norm,
  out_res_norm,  // output AttnRes: norm and projection, folded into one vector at load
  out_res_proj,
  // per layer: norms and AttnRes
  attn_norm,
  ffn_norm,
  attn_res_norm,
  attn_res_proj,
  mlp_res_norm,
  mlp_res_proj,
  // KDA sequence mixer
  kda_q,
  kda_k,
  kda_v,
  kda_q_conv,
  kda_k_conv,
  kda_v_conv,
  kda_f_a,
  kda_f_b,
  kda_a_log,
  kda_dt_bias,
  kda_b,
  kda_g,
  kda_o_norm,
  kda_o,
  // gated MLA sequence mixer
  mla_q_a,
  mla_q_a_norm,
  mla_q_b,
  mla_kv_a,
  mla_kv_a_norm,
  mla_kv_b,
  mla_g,
  mla_o,
  // dense SiTU-GLU FFN
  dense_gate,
  dense_up,
  dense_down,
  // LatentMoE FFN
  moe_router,
  moe_router_bias,
  moe_latent_down,
  moe_latent_norm,
  moe_latent_up,
  moe_shared_gate,
  moe_shared_up,
  moe_shared_down,
  expert_w1,  // gate [I, L]
  expert_w2,  // down [L, I]
  expert_w3,  // up [I, L]
  // the MTP head (layer n_layer; training only, inference leaves it unbound)
  mtp_enorm,      // RMSNorm of the next token's embedding
  mtp_hnorm,      // RMSNorm of the main model's hidden state
  mtp_eh_proj,    // [d, 2d] over concat(enorm(e), hnorm(h))
  mtp_head_norm,  // shared_head.norm, before the shared lm_head
};

struct WeightEntry {
  std::string name;            // checkpoint name, e.g. "language_model.lm_head.weight"
  std::vector<int64_t> shape;  // official shape (the loader also accepts a few variants)
  std::string role;            // component, e.g. "kda attention", "moe routed experts"
  WeightSlot slot = WeightSlot::embed;
  int64_t layer = -1;   // decoder layer; -1 for model-level tensors
  int64_t expert = -1;  // routed expert; -1 otherwise
  // Logical parameters: the element count, except MXFP4, where a packed byte holds two
  // parameters and the scales hold none.
  int64_t params = 0;
};

// Every tensor of the text model, in checkpoint-table order.
std::vector<WeightEntry> weight_table(const HParams& hp);

}  // namespace k3
