#include "model/hparams.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace k3 {
namespace {

using nlohmann::json;

// Reads fields of one JSON object, naming `where.field` in every error.
class Fields {
 public:
  Fields(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  int64_t positive(const char* key) const {
    const json& v = required(key);
    check(v.is_number_integer() && v.get<int64_t>() > 0, where_, ".", key,
          ": expected a positive integer, found ", v.dump());
    return v.get<int64_t>();
  }
  int64_t non_negative(const char* key, int64_t dflt) const {
    if (!obj_.contains(key) || obj_[key].is_null()) return dflt;
    const json& v = obj_[key];
    check(v.is_number_integer() && v.get<int64_t>() >= 0, where_, ".", key,
          ": expected a non-negative integer, found ", v.dump());
    return v.get<int64_t>();
  }
  float number(const char* key, float dflt) const {
    if (!obj_.contains(key) || obj_[key].is_null()) return dflt;
    const json& v = obj_[key];
    check(v.is_number(), where_, ".", key, ": expected a number, found ", v.dump());
    return v.get<float>();
  }
  bool boolean(const char* key, bool dflt) const {
    if (!obj_.contains(key) || obj_[key].is_null()) return dflt;
    const json& v = obj_[key];
    check(v.is_boolean(), where_, ".", key, ": expected true/false, found ", v.dump());
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& dflt) const {
    if (!obj_.contains(key) || obj_[key].is_null()) return dflt;
    const json& v = obj_[key];
    check(v.is_string(), where_, ".", key, ": expected a string, found ", v.dump());
    return v.get<std::string>();
  }
  const json& object(const char* key) const {
    const json& v = required(key);
    check(v.is_object(), where_, ".", key, ": expected an object");
    return v;
  }
  std::vector<int64_t> int_list(const char* key) const {
    std::vector<int64_t> out;
    if (!obj_.contains(key) || obj_[key].is_null()) return out;
    const json& v = obj_[key];
    check(v.is_array(), where_, ".", key, ": expected a list of layer numbers");
    for (const json& e : v) {
      check(e.is_number_integer(), where_, ".", key, ": expected integers, found ", e.dump());
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  const std::string& where() const { return where_; }

 private:
  const json& required(const char* key) const {
    check(obj_.contains(key) && !obj_[key].is_null(), where_, ": missing field '", key, "'");
    return obj_[key];
  }
  const json& obj_;
  std::string where_;
};

// Builds the per-layer attention schedule from the 1-based layer lists.
std::vector<AttnKind> attn_schedule(const Fields& lin, int64_t n_layer) {
  std::vector<int64_t> full = lin.int_list("full_attn_layers");
  std::vector<int64_t> kda = lin.int_list("kda_layers");
  check(!full.empty() || !kda.empty(), lin.where(),
        ": needs full_attn_layers and/or kda_layers (1-based layer numbers)");
  std::vector<int> seen(static_cast<size_t>(n_layer), -1);  // -1 unset, 0 kda, 1 mla
  auto mark = [&](const std::vector<int64_t>& list, int kind, const char* name) {
    for (int64_t l1 : list) {
      check(l1 >= 1 && l1 <= n_layer, lin.where(), ".", name, ": layer ", l1,
            " is outside 1..num_hidden_layers (", n_layer, ")");
      int& s = seen[static_cast<size_t>(l1 - 1)];
      check(s == -1, lin.where(), ": layer ", l1, " (1-based) is listed twice",
            s != kind ? " (in both full_attn_layers and kda_layers)" : "");
      s = kind;
    }
  };
  mark(kda, 0, "kda_layers");
  mark(full, 1, "full_attn_layers");
  std::vector<AttnKind> out;
  for (int64_t l = 0; l < n_layer; ++l) {
    int s = seen[static_cast<size_t>(l)];
    if (s == -1) {
      // One list given: the other is its complement. Both given: every layer must be covered.
      check(full.empty() || kda.empty(), lin.where(), ": layer ", l + 1,
            " (1-based) is in neither full_attn_layers nor kda_layers");
      s = full.empty() ? 1 : 0;
    }
    out.push_back(s == 1 ? AttnKind::mla : AttnKind::kda);
  }
  return out;
}

ExpertFormat expert_format(const json& top, const json& text, const std::string& source) {
  const json* q = nullptr;
  if (top.contains("quantization_config") && top["quantization_config"].is_object()) {
    q = &top["quantization_config"];
  } else if (text.contains("quantization_config") && text["quantization_config"].is_object()) {
    q = &text["quantization_config"];
  }
  if (!q) return ExpertFormat::bf16;
  std::string method = q->value("quant_method", "");
  std::string format = q->value("format", "");
  check(method == "compressed-tensors" && format == "mxfp4-pack-quantized", source,
        ": quantization_config: only compressed-tensors/mxfp4-pack-quantized is supported, found ",
        method, "/", format);
  return ExpertFormat::mxfp4;
}

void validate(const HParams& hp, const std::string& w) {
  const MoeHParams& m = hp.moe;
  check(hp.attn_res_block > 0, w, ".attn_res_block_size must be positive");
  if (m.n_expert > 0) {
    check(m.n_used >= 1 && m.n_used <= m.n_expert, w, ".num_experts_per_token (", m.n_used,
          ") must be in 1..num_experts (", m.n_expert, ")");
    check(m.layer_freq >= 1, w, ".moe_layer_freq must be >= 1");
  }
  if (m.expert_format == ExpertFormat::mxfp4) {
    check(m.d_latent % 32 == 0 && m.d_expert % 32 == 0, w,
          ": MXFP4 experts need routed_expert_hidden_size (", m.d_latent,
          ") and moe_intermediate_size (", m.d_expert, ") divisible by the group size 32");
  }
}

}  // namespace

int64_t HParams::n_layers_of(AttnKind k) const {
  int64_t n = 0;
  for (AttnKind a : attn_kind) n += a == k;
  return n;
}

HParams hparams_from_json(const json& top, const std::string& source) {
  check(top.is_object(), source, ": expected a JSON object");
  const json& text = top.contains("text_config") ? top["text_config"] : top;
  check(text.is_object(), source, ": text_config must be an object");
  Fields t(text, source + ": text_config");
  HParams hp;
  hp.vocab = t.positive("vocab_size");
  hp.d_model = t.positive("hidden_size");
  hp.n_layer = t.positive("num_hidden_layers");
  hp.d_ff = t.non_negative("intermediate_size", 0);
  hp.attn_res_block = t.positive("attn_res_block_size");
  hp.max_positions = t.non_negative("max_position_embeddings", 1 << 20);
  hp.rms_eps = t.number("rms_norm_eps", 1e-5f);
  hp.situ_beta = t.number("activation_situ_beta", 4.0f);
  hp.situ_linear_beta = t.number("activation_situ_linear_beta", 25.0f);
  hp.bos_id = t.non_negative("bos_token_id", -1);
  hp.eos_id = t.non_negative("eos_token_id", -1);
  hp.pad_id = t.non_negative("pad_token_id", -1);

  std::string act = t.string("hidden_act", "situ");
  check(act == "situ", t.where(), ".hidden_act: unknown activation '", act, "' (supported: situ)");
  check(hp.situ_beta > 0 && hp.situ_linear_beta > 0, t.where(),
        ": activation_situ_beta and activation_situ_linear_beta must be positive");
  check(!t.boolean("tie_word_embeddings", false), t.where(),
        ".tie_word_embeddings: tied embeddings are not part of the K3 layout");
  check(t.boolean("mla_use_nope", true), t.where(),
        ".mla_use_nope: only NoPE MLA (no rotary embedding) is supported");
  check(t.boolean("mla_use_output_gate", true), t.where(),
        ".mla_use_output_gate: only gated MLA is supported");
  check(t.non_negative("num_nextn_predict_layers", 0) == 0, t.where(),
        ".num_nextn_predict_layers: MTP layers are not supported");

  MlaHParams& a = hp.mla;
  a.n_head = t.positive("num_attention_heads");
  int64_t n_kv = t.non_negative("num_key_value_heads", a.n_head);
  check(n_kv > 0 && a.n_head % n_kv == 0, t.where(), ": num_attention_heads (", a.n_head,
        ") is not divisible by num_key_value_heads (", n_kv, ")");
  a.q_lora_rank = t.positive("q_lora_rank");
  a.kv_lora_rank = t.positive("kv_lora_rank");
  a.qk_nope = t.positive("qk_nope_head_dim");
  a.qk_rope = t.non_negative("qk_rope_head_dim", 0);
  a.v_head = t.positive("v_head_dim");

  Fields lin(t.object("linear_attn_config"), t.where() + ".linear_attn_config");
  KdaHParams& k = hp.kda;
  k.n_head = lin.positive("num_heads");
  k.head_dim = lin.positive("head_dim");
  k.conv_kernel = lin.positive("short_conv_kernel_size");
  k.gate_lower_bound = lin.number("gate_lower_bound", -5.0f);
  check(k.gate_lower_bound < 0, lin.where(), ".gate_lower_bound must be negative");
  check(lin.boolean("use_full_rank_gate", true), lin.where(),
        ".use_full_rank_gate: the low-rank g_a/g_b output gate is not supported");
  hp.attn_kind = attn_schedule(lin, hp.n_layer);

  MoeHParams& m = hp.moe;
  m.n_expert = t.non_negative("num_experts", 0);
  m.n_used = t.non_negative("num_experts_per_token", 0);
  m.n_shared = t.non_negative("num_shared_experts", 0);
  m.d_expert = m.n_expert ? t.positive("moe_intermediate_size") : 0;
  m.d_latent = m.n_expert ? t.positive("routed_expert_hidden_size") : 0;
  m.renormalize = t.boolean("moe_renormalize", true);
  m.routed_scale = t.number("routed_scaling_factor", 1.0f);
  m.first_dense = t.non_negative("first_k_dense_replace", 0);
  m.layer_freq = t.non_negative("moe_layer_freq", 1);
  check(t.boolean("latent_moe_use_norm", true), t.where(),
        ".latent_moe_use_norm: only the Stable (normed) LatentMoE is supported");
  std::string router = t.string("moe_router_activation_func", "sigmoid");
  check(router == "sigmoid", t.where(), ".moe_router_activation_func: unknown '", router,
        "' (supported: sigmoid)");
  int64_t groups = t.non_negative("num_expert_group", 1);
  check(groups <= 1 || (m.n_expert % groups == 0), t.where(), ": num_experts (", m.n_expert,
        ") is not divisible by num_expert_group (", groups, ")");
  check(groups <= 1, t.where(), ".num_expert_group: group-limited routing (", groups,
        " groups) is not supported");
  m.expert_format = expert_format(top, text, source);
  bool any_dense = false;
  for (int64_t l = 0; l < hp.n_layer; ++l) any_dense |= !hp.is_moe_layer(l);
  check(!any_dense || hp.d_ff > 0, t.where(), ": intermediate_size is needed for dense layers");
  validate(hp, t.where());
  return hp;
}

HParams hparams_from_file(const std::string& path) {
  std::ifstream f(path);
  check(f.good(), "cannot open ", path);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  check(!j.is_discarded(), path, ": not valid JSON");
  return hparams_from_json(j, path);
}

}  // namespace k3
