// Typed views of a checkpoint's weights, bound by walking the weight table
// (loader/tensor_table.h) once: each spec's key names the field below and its transform says
// what happens at load. Matrices stay in the memory-mapped files (BF16/F32/MXFP4, widened on the
// fly); small 1-D tensors (norm weights, gate biases, conv taps) are widened to fp32 once, A_log
// is sliced to the KDA head count, AttnRes norm ⊙ proj is folded into one vector, and MLA's kv_b
// is split per head for the absorbed form (W_UK transposed once, bit-exact, in its own dtype).
#pragma once

#include <memory>
#include <vector>

#include "loader/checkpoint.h"
#include "ops/linear/linear.h"
#include "ops/mla/mla.h"
#include "ops/moe/moe_experts.h"

namespace k3 {

using Vec = std::vector<float>;

struct KdaWeights {
  Mat q, k, v;                 // [P, d]
  Vec q_conv, k_conv, v_conv;  // [P, W] conv taps
  Mat f_a;                     // [K, d]   decay gate, low-rank down
  Mat f_b;                     // [P, K]   decay gate, up
  Vec A_log;                   // [H]      (stored padded; sliced here)
  Vec dt_bias;                 // [P]
  Mat b;                       // [H, d]   β logits
  Mat g;                       // [P, d]   output gate
  Vec o_norm;                  // [K]
  Mat o;                       // [d, P]
};

struct MlaWeights {
  Mat q_a;        // [q_lora, d]
  Vec q_a_norm;   // [q_lora]
  Mat q_b;        // [H*(Dn+Dr), q_lora]
  Mat kv_a;       // [Dc+Dr, d]
  Vec kv_a_norm;  // [Dc]
  Mat kv_b;       // [H*(Dn+Dv), Dc]
  Mat g;          // [H*Dv, d]
  Mat o;          // [d, H*Dv]
  // kv_b split for the absorbed form (load-time transform): uk_t owns W_UKᵀ per head.
  MlaAbsorbedWeights absorbed;
  std::shared_ptr<const std::vector<uint8_t>> uk_t_storage;
};

// SiTU-GLU FFN: down(φ(gate·x, up·x)); the routed experts' op takes an array of them.
using FfnWeights = ExpertMats;

struct MoeWeights {
  Mat router;         // [E, d]
  Vec router_bias;    // [E]  e_score_correction_bias (selection only)
  Mat latent_down;    // [L, d]
  Vec latent_norm;    // [L]
  Mat latent_up;      // [d, L]
  FfnWeights shared;  // width n_shared*d_expert on the full-width input (empty if none)
  std::vector<FfnWeights> experts;  // gate=w1 [I, L], up=w3 [I, L], down=w2 [L, I]
};

struct LayerWeights {
  Vec attn_norm, ffn_norm;  // input_layernorm, post_attention_layernorm [d]
  Vec attn_res, mlp_res;    // folded AttnRes vectors (norm ⊙ proj) [d]
  KdaWeights kda;           // used when the layer is KDA
  MlaWeights mla;           // used when the layer is MLA
  FfnWeights dense;         // used when the layer is dense
  MoeWeights moe;           // used when the layer is MoE
};

struct ModelWeights {
  Mat embed;    // [vocab, d]
  Vec norm;     // [d]
  Vec out_res;  // [d] folded output AttnRes vector
  Mat lm_head;  // [vocab, d]
  std::vector<LayerWeights> layers;
};

ModelWeights bind_weights(const Checkpoint& ckpt);

}  // namespace k3
