#include "loader/tensor_table.h"

#include <algorithm>

namespace k3 {
namespace {

using S = WeightSlot;
using T = Transform;
using Shapes = std::vector<std::vector<int64_t>>;

const std::vector<DType> kFloat = {DType::bf16, DType::f32};
const std::vector<DType> kF32 = {DType::f32, DType::bf16};  // official dtype F32 (spec §3.1)
const std::vector<DType> kByte = {DType::u8};

// Views stay in the mapped file; everything the binder copies is widened to fp32, except the
// kv_b split, which is a copy on top of a view.
Placement placement_of(Transform t) {
  switch (t) {
    case T::none:
    case T::kv_b_split:
    case T::mxfp4_packed:
    case T::mxfp4_scales:
      return Placement::mapped;
    default:
      return Placement::host_f32;
  }
}

// Collects the specs of one component: common name prefix, role, layer and expert.
struct Table {
  std::vector<TensorSpec>& out;
  std::string prefix;
  std::string role;
  int64_t layer = -1, expert = -1;
  void add(S slot, const std::string& name, Shapes shapes, const std::vector<DType>& dtypes, T tf) {
    out.push_back({prefix + name,
                   std::move(shapes),
                   dtypes,
                   role,
                   {slot, layer, expert},
                   tf,
                   placement_of(tf)});
  }
  void mat(S slot, const std::string& name, std::vector<int64_t> shape, T tf = T::none) {
    add(slot, name, {std::move(shape)}, kFloat, tf);
  }
  void vec(S slot, const std::string& name, std::vector<int64_t> shape,
           const std::vector<DType>& dtypes = kFloat, T tf = T::widen_f32) {
    add(slot, name, {std::move(shape)}, dtypes, tf);
  }
};

void add_kda(Table t, const HParams& hp) {
  const int64_t d = hp.d_model, H = hp.kda.n_head, K = hp.kda.head_dim, P = hp.kda.proj_dim();
  const char* names[] = {"q", "k", "v"};
  const S projs[] = {S::kda_q, S::kda_k, S::kda_v};
  const S convs[] = {S::kda_q_conv, S::kda_k_conv, S::kda_v_conv};
  for (int i = 0; i < 3; ++i) {
    t.mat(projs[i], std::string(names[i]) + "_proj.weight", {P, d});
    t.vec(convs[i], std::string(names[i]) + "_conv1d.weight", {P, 1, hp.kda.conv_kernel}, kF32,
          T::conv_taps_flatten);
  }
  t.mat(S::kda_f_a, "f_a_proj.weight", {K, d});
  t.mat(S::kda_f_b, "f_b_proj.weight", {P, K});
  // Official: padded to head_dim with zeros (only the first H used). Also accept unpadded forms.
  t.add(S::kda_a_log, "A_log", {{std::max(H, K)}, {H}, {H, 1}}, kF32, T::a_log_slice);
  t.add(S::kda_dt_bias, "dt_bias", {{P}, {H, K}}, kF32, T::widen_f32);
  t.mat(S::kda_b, "b_proj.weight", {H, d});
  t.mat(S::kda_g, "g_proj.weight", {P, d});
  t.vec(S::kda_o_norm, "o_norm.weight", {K}, kF32);
  t.mat(S::kda_o, "o_proj.weight", {d, P});
}

void add_mla(Table t, const HParams& hp) {
  const MlaHParams& m = hp.mla;
  const int64_t d = hp.d_model;
  t.mat(S::mla_q_a, "q_a_proj.weight", {m.q_lora_rank, d});
  t.vec(S::mla_q_a_norm, "q_a_layernorm.weight", {m.q_lora_rank});
  t.mat(S::mla_q_b, "q_b_proj.weight", {m.n_head * m.qk_head(), m.q_lora_rank});
  t.mat(S::mla_kv_a, "kv_a_proj_with_mqa.weight", {m.kv_lora_rank + m.qk_rope, d});
  t.vec(S::mla_kv_a_norm, "kv_a_layernorm.weight", {m.kv_lora_rank});
  t.mat(S::mla_kv_b, "kv_b_proj.weight", {m.n_head * (m.qk_nope + m.v_head), m.kv_lora_rank},
        T::kv_b_split);
  t.mat(S::mla_g, "g_proj.weight", {m.n_head * m.v_head, d});
  t.mat(S::mla_o, "o_proj.weight", {d, m.n_head * m.v_head});
}

// A routed expert weight W[rows, cols], plain or MXFP4-packed (two nibbles per byte,
// one E8M0 scale per 32 columns).
void add_expert_matrix(Table& t, S slot, const std::string& name, int64_t rows, int64_t cols,
                       ExpertFormat f) {
  if (f == ExpertFormat::mxfp4) {
    t.add(slot, name + ".weight_packed", {{rows, cols / 2}}, kByte, T::mxfp4_packed);
    t.add(slot, name + ".weight_scale", {{rows, cols / 32}}, kByte, T::mxfp4_scales);
  } else {
    t.mat(slot, name + ".weight", {rows, cols});
  }
}

void add_experts(Table t, const MoeHParams& m) {
  t.role = "moe routed experts";
  for (int64_t e = 0; e < m.n_expert; ++e) {
    const std::string ex = "experts." + std::to_string(e);
    t.expert = e;
    add_expert_matrix(t, S::expert_w1, ex + ".w1", m.d_expert, m.d_latent, m.expert_format);
    add_expert_matrix(t, S::expert_w2, ex + ".w2", m.d_latent, m.d_expert, m.expert_format);
    add_expert_matrix(t, S::expert_w3, ex + ".w3", m.d_expert, m.d_latent, m.expert_format);
  }
}

void add_moe(Table t, const HParams& hp) {
  const MoeHParams& m = hp.moe;
  const int64_t d = hp.d_model;
  t.role = "moe router";
  t.mat(S::moe_router, "gate.weight", {m.n_expert, d});
  t.vec(S::moe_router_bias, "gate.e_score_correction_bias", {m.n_expert}, kF32);
  t.role = "moe latent projections";
  t.mat(S::moe_latent_down, "routed_expert_down_proj.weight", {m.d_latent, d});
  t.vec(S::moe_latent_norm, "routed_expert_norm.weight", {m.d_latent});
  t.mat(S::moe_latent_up, "routed_expert_up_proj.weight", {d, m.d_latent});
  t.role = "moe shared experts";
  const int64_t ds = m.n_shared * m.d_expert;
  if (ds > 0) {
    t.mat(S::moe_shared_gate, "shared_experts.gate_proj.weight", {ds, d});
    t.mat(S::moe_shared_up, "shared_experts.up_proj.weight", {ds, d});
    t.mat(S::moe_shared_down, "shared_experts.down_proj.weight", {d, ds});
  }
  add_experts(t, m);
}

void add_dense(Table t, const HParams& hp) {
  t.mat(S::dense_gate, "gate_proj.weight", {hp.d_ff, hp.d_model});
  t.mat(S::dense_up, "up_proj.weight", {hp.d_ff, hp.d_model});
  t.mat(S::dense_down, "down_proj.weight", {hp.d_model, hp.d_ff});
}

void add_layer(std::vector<TensorSpec>& out, const HParams& hp, int64_t l) {
  const int64_t d = hp.d_model;
  const std::string p = layer_prefix(l);
  Table t{out, p, "norms and attn-res", l};
  t.vec(S::attn_norm, "input_layernorm.weight", {d});
  t.vec(S::ffn_norm, "post_attention_layernorm.weight", {d});
  t.vec(S::attn_res_norm, "self_attention_res_norm.weight", {d}, kFloat, T::attn_res_fold);
  t.vec(S::mlp_res_norm, "mlp_res_norm.weight", {d}, kFloat, T::attn_res_fold);
  t.vec(S::attn_res_proj, "self_attention_res_proj.weight", {1, d}, kFloat, T::attn_res_fold);
  t.vec(S::mlp_res_proj, "mlp_res_proj.weight", {1, d}, kFloat, T::attn_res_fold);
  if (hp.attn_kind[static_cast<size_t>(l)] == AttnKind::kda) {
    add_kda({out, p + "self_attn.", "kda attention", l}, hp);
  } else {
    add_mla({out, p + "self_attn.", "mla attention", l}, hp);
  }
  if (hp.is_moe_layer(l)) {
    add_moe({out, p + "block_sparse_moe.", "moe", l}, hp);
  } else {
    add_dense({out, p + "mlp.", "dense ffn", l}, hp);
  }
}

// The MTP head (docs/TRAINING.md): one K3 layer with plain residuals, at index n_layer. Its
// attention is MLA, its FFN a LatentMoE when the model has experts, else dense. Every tensor
// of it has the role "mtp head" (training only: inspect and cost keep it apart).
void add_mtp_layer(std::vector<TensorSpec>& out, const HParams& hp) {
  const size_t first = out.size();
  const int64_t d = hp.d_model, l = hp.n_layer;
  const std::string p = layer_prefix(l);
  Table t{out, p, "mtp head", l};
  t.vec(S::mtp_enorm, "enorm.weight", {d});
  t.vec(S::mtp_hnorm, "hnorm.weight", {d});
  t.mat(S::mtp_eh_proj, "eh_proj.weight", {d, 2 * d});
  t.vec(S::mtp_head_norm, "shared_head.norm.weight", {d});
  t.vec(S::attn_norm, "input_layernorm.weight", {d});
  t.vec(S::ffn_norm, "post_attention_layernorm.weight", {d});
  add_mla({out, p + "self_attn.", "mla attention", l}, hp);
  if (hp.mtp_is_moe()) {
    add_moe({out, p + "block_sparse_moe.", "moe", l}, hp);
  } else {
    add_dense({out, p + "mlp.", "dense ffn", l}, hp);
  }
  for (size_t i = first; i < out.size(); ++i) out[i].role = "mtp head";
}

}  // namespace

std::string layer_prefix(int64_t l) { return kModelPrefix + "layers." + std::to_string(l) + "."; }

bool is_ignored_tensor(const std::string& name) {
  for (const char* p : {"vision_tower.", "mm_projector.", "language_model.vision_tower.",
                        "multi_modal_projector."}) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

int64_t logical_params(const TensorSpec& spec) {
  if (spec.transform == T::mxfp4_scales) return 0;
  int64_t n = 1;
  for (int64_t x : spec.shapes[0]) n *= x;
  return spec.transform == T::mxfp4_packed ? 2 * n : n;
}

std::vector<TensorSpec> expected_tensors(const HParams& hp) {
  std::vector<TensorSpec> out;
  const int64_t d = hp.d_model;
  Table top{out, kModelPrefix, "embedding"};
  top.mat(S::embed, "embed_tokens.weight", {hp.vocab, d});
  top.role = "norms and attn-res";
  top.vec(S::final_norm, "norm.weight", {d});
  top.vec(S::out_res_norm, "output_attn_res_norm.weight", {d}, kFloat, T::attn_res_fold);
  top.vec(S::out_res_proj, "output_attn_res_proj.weight", {1, d}, kFloat, T::attn_res_fold);
  Table{out, "", "lm head"}.mat(S::lm_head, kLmHead, {hp.vocab, d});
  for (int64_t l = 0; l < hp.n_layer; ++l) add_layer(out, hp, l);
  if (hp.n_mtp == 1) add_mtp_layer(out, hp);
  return out;
}

}  // namespace k3
