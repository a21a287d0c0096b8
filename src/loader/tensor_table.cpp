#include "loader/tensor_table.h"

namespace k3 {
namespace {

const std::vector<DType> kFloat = {DType::bf16, DType::f32};
const std::vector<DType> kF32 = {DType::f32, DType::bf16};  // official dtype F32 (spec §3.1)
const std::vector<DType> kByte = {DType::u8};

// Collects specs with the common prefix of one component.
struct Table {
  std::vector<TensorSpec>& out;
  std::string prefix;
  std::string role;
  void add(const std::string& name, std::vector<int64_t> shape,
           const std::vector<DType>& dtypes = kFloat) {
    out.push_back({prefix + name, {std::move(shape)}, dtypes, role});
  }
  void add_any(const std::string& name, std::vector<std::vector<int64_t>> shapes) {
    out.push_back({prefix + name, std::move(shapes), kF32, role});
  }
};

void add_kda(Table t, const HParams& hp) {
  const int64_t d = hp.d_model, H = hp.kda.n_head, K = hp.kda.head_dim, P = hp.kda.proj_dim();
  for (const char* x : {"q", "k", "v"}) {
    t.add(std::string(x) + "_proj.weight", {P, d});
    t.add(std::string(x) + "_conv1d.weight", {P, 1, hp.kda.conv_kernel}, kF32);
  }
  t.add("f_a_proj.weight", {K, d});
  t.add("f_b_proj.weight", {P, K});
  // Official: padded to head_dim with zeros (only the first H used). Also accept unpadded forms.
  std::vector<std::vector<int64_t>> a_log = {{std::max(H, K)}, {H}, {H, 1}};
  t.add_any("A_log", a_log);
  t.add_any("dt_bias", {{P}, {H, K}});
  t.add("b_proj.weight", {H, d});
  t.add("g_proj.weight", {P, d});
  t.add("o_norm.weight", {K}, kF32);
  t.add("o_proj.weight", {d, P});
}

void add_mla(Table t, const HParams& hp) {
  const MlaHParams& m = hp.mla;
  const int64_t d = hp.d_model;
  t.add("q_a_proj.weight", {m.q_lora_rank, d});
  t.add("q_a_layernorm.weight", {m.q_lora_rank});
  t.add("q_b_proj.weight", {m.n_head * m.qk_head(), m.q_lora_rank});
  t.add("kv_a_proj_with_mqa.weight", {m.kv_lora_rank + m.qk_rope, d});
  t.add("kv_a_layernorm.weight", {m.kv_lora_rank});
  t.add("kv_b_proj.weight", {m.n_head * (m.qk_nope + m.v_head), m.kv_lora_rank});
  t.add("g_proj.weight", {m.n_head * m.v_head, d});
  t.add("o_proj.weight", {d, m.n_head * m.v_head});
}

// A routed expert weight W[rows, cols], plain or MXFP4-packed (two nibbles per byte,
// one E8M0 scale per 32 columns).
void add_expert_matrix(Table& t, const std::string& name, int64_t rows, int64_t cols,
                       ExpertFormat f) {
  if (f == ExpertFormat::mxfp4) {
    t.add(name + ".weight_packed", {rows, cols / 2}, kByte);
    t.add(name + ".weight_scale", {rows, cols / 32}, kByte);
  } else {
    t.add(name + ".weight", {rows, cols});
  }
}

void add_moe(Table t, const HParams& hp) {
  const MoeHParams& m = hp.moe;
  const int64_t d = hp.d_model;
  t.role = "moe router";
  t.add("gate.weight", {m.n_expert, d});
  t.add("gate.e_score_correction_bias", {m.n_expert}, kF32);
  t.role = "moe latent projections";
  t.add("routed_expert_down_proj.weight", {m.d_latent, d});
  t.add("routed_expert_norm.weight", {m.d_latent});
  t.add("routed_expert_up_proj.weight", {d, m.d_latent});
  t.role = "moe shared experts";
  const int64_t ds = m.n_shared * m.d_expert;
  if (ds > 0) {
    t.add("shared_experts.gate_proj.weight", {ds, d});
    t.add("shared_experts.up_proj.weight", {ds, d});
    t.add("shared_experts.down_proj.weight", {d, ds});
  }
  t.role = "moe routed experts";
  for (int64_t e = 0; e < m.n_expert; ++e) {
    std::string ex = "experts." + std::to_string(e);
    add_expert_matrix(t, ex + ".w1", m.d_expert, m.d_latent, m.expert_format);
    add_expert_matrix(t, ex + ".w2", m.d_latent, m.d_expert, m.expert_format);
    add_expert_matrix(t, ex + ".w3", m.d_expert, m.d_latent, m.expert_format);
  }
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

std::vector<TensorSpec> expected_tensors(const HParams& hp) {
  std::vector<TensorSpec> out;
  const int64_t d = hp.d_model;
  Table top{out, kModelPrefix, "embedding"};
  top.add("embed_tokens.weight", {hp.vocab, d});
  top.role = "norms and attn-res";
  top.add("norm.weight", {d});
  top.add("output_attn_res_norm.weight", {d});
  top.add("output_attn_res_proj.weight", {1, d});
  out.push_back({kLmHead, {{hp.vocab, d}}, kFloat, "lm head"});
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    std::string p = layer_prefix(l);
    Table layer{out, p, "norms and attn-res"};
    for (const char* n : {"input_layernorm", "post_attention_layernorm", "self_attention_res_norm",
                          "mlp_res_norm"}) {
      layer.add(std::string(n) + ".weight", {d});
    }
    layer.add("self_attention_res_proj.weight", {1, d});
    layer.add("mlp_res_proj.weight", {1, d});
    if (hp.attn_kind[static_cast<size_t>(l)] == AttnKind::kda) {
      add_kda({out, p + "self_attn.", "kda attention"}, hp);
    } else {
      add_mla({out, p + "self_attn.", "mla attention"}, hp);
    }
    if (hp.is_moe_layer(l)) {
      add_moe({out, p + "block_sparse_moe.", "moe"}, hp);
    } else {
      Table mlp{out, p + "mlp.", "dense ffn"};
      mlp.add("gate_proj.weight", {hp.d_ff, d});
      mlp.add("up_proj.weight", {hp.d_ff, d});
      mlp.add("down_proj.weight", {d, hp.d_ff});
    }
  }
  return out;
}

}  // namespace k3
