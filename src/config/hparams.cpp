#include <algorithm>
#include <cfloat>
#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string_view>

#include "config/hparams_json.h"
#include "core/error.h"
#include "k3/json_depth.h"

namespace k3 {
namespace {

using nlohmann::json;

// Limits that turn an absurd config into an error before anything is sized from it. Each is far
// above the release (spec §1.2: widths <= 163840, 93 layers, 1.2e9-element largest tensor,
// 2.8e12 parameters, 497,220 tensors), and small enough that sums and products of two fields
// cannot overflow int64.
constexpr int64_t kMaxWidth = int64_t{1} << 24;  // widths, head counts, vocab, expert counts
constexpr int64_t kMaxLayers = int64_t{1} << 16;
constexpr int64_t kMaxPositions = int64_t{1} << 40;
constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
constexpr int64_t kMaxParams = int64_t{1} << 50;
// 4x the release's tensor count: a config read without a checkpoint (k3 cost --config, k3 init)
// lists every tensor, a few hundred bytes each. With a checkpoint, its shards bound the counts.
constexpr int64_t kMaxTensors = int64_t{1} << 21;
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

// Saturating arithmetic: an oversized product compares as too large instead of overflowing.
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kNoLimit : r;
}
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kNoLimit : r;
}
std::string count_str(int64_t n) { return n == kNoLimit ? "more than 2^63" : std::to_string(n); }

std::string integer_range(int64_t lo, int64_t hi) {
  if (lo == hi) return std::to_string(lo);
  std::string s = lo == 1   ? "a positive integer"
                  : lo == 0 ? "a non-negative integer"
                            : cat("an integer >= ", lo);
  return hi == kNoLimit ? s : cat(s, " <= ", hi);
}

enum class Sign { positive, negative };

// Reads fields of one JSON object, naming `where.field`, what was expected and what was found in
// every error. A null field counts as absent.
class Fields {
 public:
  Fields(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  // A required integer in lo..hi.
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    return in_range(key, required(key), lo, hi, integer_range(lo, hi));
  }
  // An optional integer in lo..hi, `dflt` when absent.
  int64_t integer(const char* key, int64_t lo, int64_t hi, int64_t dflt) const {
    return has(key) ? in_range(key, obj_[key], lo, hi, integer_range(lo, hi)) : dflt;
  }
  // An optional token id: inside the vocabulary, or -1 (also when absent) for none.
  int64_t token_id(const char* key, int64_t vocab) const {
    if (!has(key)) return -1;
    const json& v = obj_[key];
    if (v.is_number_integer() && v.get<int64_t>() == -1) return -1;
    return in_range(key, v, 0, vocab - 1,
                    cat("a token id in 0..", vocab - 1, " (vocab_size ", vocab, ") or -1"));
  }
  // An optional finite number of the given sign that stays so as a float.
  float number(const char* key, float dflt, Sign sign) const {
    if (!has(key)) return dflt;
    const json& v = obj_[key];
    const double d = v.is_number() ? v.get<double>() : 0.0;
    const float f = std::isfinite(d) && std::fabs(d) <= FLT_MAX ? static_cast<float>(d) : 0.0f;
    K3_CHECK(sign == Sign::positive ? f > 0 : f < 0, where_, ".", key, ": expected a finite ",
             sign == Sign::positive ? "positive" : "negative", " number (float range), found ",
             v.dump());
    return f;
  }
  bool boolean(const char* key, bool dflt) const {
    if (!has(key)) return dflt;
    const json& v = obj_[key];
    K3_CHECK(v.is_boolean(), where_, ".", key, ": expected true/false, found ", v.dump());
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& dflt) const {
    if (!has(key)) return dflt;
    const json& v = obj_[key];
    K3_CHECK(v.is_string(), where_, ".", key, ": expected a string, found ", v.dump());
    return v.get<std::string>();
  }
  const json& object(const char* key) const {
    const json& v = required(key);
    K3_CHECK(v.is_object(), where_, ".", key, ": expected an object, found ", v.dump());
    return v;
  }
  std::vector<int64_t> int_list(const char* key) const {
    std::vector<int64_t> out;
    if (!has(key)) return out;
    const json& v = obj_[key];
    K3_CHECK(v.is_array(), where_, ".", key, ": expected a list of layer numbers, found ",
             v.dump());
    for (const json& e : v) {
      K3_CHECK(e.is_number_integer(), where_, ".", key, ": expected integers, found ", e.dump());
      out.push_back(e.is_number_unsigned() && e.get<uint64_t>() > uint64_t{kNoLimit}
                        ? kNoLimit
                        : e.get<int64_t>());
    }
    return out;
  }
  bool has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const std::string& where() const { return where_; }

 private:
  const json& required(const char* key) const {
    check(has(key), where_, ": missing field '", key, "'");
    return obj_[key];
  }
  int64_t in_range(const char* key, const json& v, int64_t lo, int64_t hi,
                   const std::string& expected) const {
    const bool fits = v.is_number_integer() &&
                      !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{kNoLimit});
    const int64_t x = fits ? v.get<int64_t>() : 0;
    K3_CHECK(fits && x >= lo && x <= hi, where_, ".", key, ": expected ", expected, ", found ",
             v.dump());
    return x;
  }
  const json& obj_;
  std::string where_;
};

// Every field the official K3 config.json has (spec §1), read by the engine or not, plus a few
// that Hugging Face tooling writes. Anything else in these objects draws a warning, never an error.
// clang-format off
constexpr std::string_view kTopKeys[] = {
    "architectures", "model_type", "media_placeholder_token_id", "bos_token_id", "eos_token_id",
    "pad_token_id", "tie_word_embeddings", "torch_dtype", "dtype", "quantization_config",
    "vision_config", "text_config", "auto_map", "transformers_version", "use_cache",
    "_name_or_path",
};
constexpr std::string_view kTextKeys[] = {
    "model_type", "architectures", "vocab_size", "hidden_size", "intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_act",
    "activation_situ_beta", "activation_situ_linear_beta", "rms_norm_eps", "tie_word_embeddings",
    "max_position_embeddings", "rope_theta", "rope_scaling", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mla_use_nope", "mla_use_output_gate",
    "num_experts", "num_experts_per_token", "num_shared_experts", "moe_intermediate_size",
    "routed_expert_hidden_size", "latent_moe_use_norm", "moe_router_activation_func",
    "moe_renormalize", "routed_scaling_factor", "use_grouped_topk", "num_expert_group",
    "topk_group", "topk_method", "first_k_dense_replace", "moe_layer_freq",
    "num_nextn_predict_layers", "attn_res_block_size", "linear_attn_config", "torch_dtype", "dtype",
    "bos_token_id", "eos_token_id", "pad_token_id", "quantization_config", "use_cache",
    "initializer_range", "transformers_version", "_name_or_path",
};
constexpr std::string_view kLinearKeys[] = {
    "num_heads", "head_dim", "short_conv_kernel_size", "gate_lower_bound", "use_full_rank_gate",
    "full_attn_layers", "kda_layers",
};
constexpr std::string_view kQuantKeys[] = {
    "quant_method", "format", "quantization_status", "config_groups", "ignore", "version",
    "global_compression_ratio", "kv_cache_scheme", "sparsity_config", "transform_config",
};
// clang-format on

std::mutex g_sink_mutex;
ConfigWarningSink g_sink;  // empty: stderr

void warn(const std::string& message) {
  ConfigWarningSink sink;
  {
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    sink = g_sink;
    if (!sink) {
      static std::set<std::string> printed;  // once per process: configs may be read twice
      if (printed.insert(message).second) std::cerr << "k3: warning: " << message << "\n";
      return;
    }
  }
  sink(message);
}

// Optimal-string-alignment distance (adjacent transpositions count 1), ignoring ASCII case.
size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

bool known(std::string_view key, std::span<const std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// Warns about each key of `obj` in neither `keys` nor `more`, suggesting the nearest of `keys`
// when it is within about a third of the name's length (so "num_experts_per_tok" finds the real
// one, but an unrelated key suggests nothing).
void warn_unknown_keys(const json& obj, const std::string& where,
                       std::span<const std::string_view> keys,
                       std::span<const std::string_view> more = {}) {
  if (!obj.is_object()) return;
  for (const auto& [key, value] : obj.items()) {
    if (known(key, keys) || known(key, more)) continue;
    std::string_view best;
    size_t best_d = std::numeric_limits<size_t>::max();
    for (std::string_view k : keys) {
      const size_t d = edit_distance(key, k);
      if (d < best_d) best_d = d, best = k;
    }
    const bool close = best_d <= std::max<size_t>(2, std::max(key.size(), best.size()) / 3);
    warn(cat(where, key, " is not a known field; ",
             close ? cat("did you mean ", best, "?") : std::string("it is ignored")));
  }
}

// Warns about unknown fields in the objects the engine reads, before any check can fail.
void warn_unknown_fields(const json& top, const json& text, const std::string& source) {
  const bool flat = &text == &top;  // no text_config: its fields sit at the top level
  const std::string t = source + ": text_config.";
  const std::span<const std::string_view> top_keys =
      flat ? kTopKeys : std::span<const std::string_view>();
  warn_unknown_keys(text, t, kTextKeys, top_keys);
  if (text.contains("linear_attn_config")) {
    warn_unknown_keys(text["linear_attn_config"], t + "linear_attn_config.", kLinearKeys);
  }
  if (top.contains("quantization_config")) {
    warn_unknown_keys(top["quantization_config"], source + ": quantization_config.", kQuantKeys);
  }
  if (!flat && text.contains("quantization_config")) {
    warn_unknown_keys(text["quantization_config"], t + "quantization_config.", kQuantKeys);
  }
}

}  // namespace

ConfigWarningSink set_config_warning_sink(ConfigWarningSink sink) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  std::swap(g_sink, sink);
  return sink;
}

std::string text_line_column(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') ++line, line_start = i + 1;
  }
  return cat(line, ":", offset - line_start + 1);
}

namespace {

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

// quantization_config at the top level, else inside text_config (spec §1.1); absent: BF16.
ExpertFormat expert_format(const json& top, const json& text, const std::string& source) {
  const bool at_top = top.contains("quantization_config") && !top["quantization_config"].is_null();
  const json& holder = at_top ? top : text;
  if (!holder.contains("quantization_config") || holder["quantization_config"].is_null()) {
    return ExpertFormat::bf16;
  }
  const std::string where =
      source + (at_top ? ": " : ": text_config.") + std::string("quantization_config");
  const json& q = holder["quantization_config"];
  K3_CHECK(q.is_object(), where, ": expected an object, found ", q.dump());
  Fields f(q, where);
  const std::string method = f.string("quant_method", ""), format = f.string("format", "");
  check(method == "compressed-tensors" && format == "mxfp4-pack-quantized", where,
        ": only compressed-tensors/mxfp4-pack-quantized is supported, found quant_method '", method,
        "', format '", format, "'");
  if (q.contains("config_groups") && q["config_groups"].is_object()) {
    for (const auto& [name, group] : q["config_groups"].items()) {
      if (!group.is_object() || !group.contains("weights") || !group["weights"].is_object()) {
        continue;
      }
      Fields w(group["weights"], where + ".config_groups." + name + ".weights");
      w.integer("num_bits", 4, 4, 4);       // E2M1
      w.integer("group_size", 32, 32, 32);  // one E8M0 scale per 32 values (spec §9.3)
    }
  }
  return ExpertFormat::mxfp4;
}

// Adds up the weights the config implies (spec §9.2, as loader/tensor_table.cpp lists them) and
// rejects absurd sizes before anything is allocated or multiplied elsewhere.
class SizeBudget {
 public:
  explicit SizeBudget(std::string where) : where_(std::move(where)) {}

  // `copies` of [rows, cols], stored as `per_copy` tensors each; `what` names the tensor and the
  // fields that size it. Stored as BF16 at least (2 bytes per element), or as MXFP4 (17 bytes
  // per 32 elements: 16 of packed nibbles, one scale).
  void add(const char* what, int64_t rows, int64_t cols, int64_t copies, int64_t per_copy = 1,
           bool mxfp4 = false) {
    const int64_t n = sat_mul(rows, cols);
    if (copies == 0 || n == 0) return;  // not declared (no shared experts, no dense layers)
    check(n <= kMaxTensorElements, where_, ": ", what, " would have ", count_str(n),
          " elements, more than the limit of ", kMaxTensorElements, " per tensor");
    params_ = sat_add(params_, sat_mul(n, copies));
    tensors_ = sat_add(tensors_, sat_mul(per_copy, copies));
    const int64_t bytes = mxfp4 ? n / 32 * 17 : sat_mul(n, 2);
    min_bytes_ = sat_add(min_bytes_, sat_mul(bytes, copies));
  }
  ImpliedSize implied() const { return {tensors_, min_bytes_}; }
  void finish() const {
    check(params_ <= kMaxParams, where_, ": the config implies ", count_str(params_),
          " parameters, more than the limit of ", kMaxParams,
          "; check the widths, num_hidden_layers and num_experts");
    check(tensors_ <= kMaxTensors, where_, ": the config implies ", count_str(tensors_),
          " tensors (num_experts x MoE layers dominate), more than the limit of ", kMaxTensors);
  }

 private:
  std::string where_;
  int64_t params_ = 0, tensors_ = 0, min_bytes_ = 0;
};

SizeBudget budget_of(const HParams& hp, const std::string& w) {
  const int64_t d = hp.d_model, n_kda = hp.n_layers_of(AttnKind::kda);
  // The MTP head (n_mtp = 0 or 1) is one more MLA layer with a MoE or dense FFN.
  const int64_t n_mla = hp.n_layers_of(AttnKind::mla) + hp.n_mtp;
  int64_t n_moe = hp.mtp_is_moe() ? 1 : 0;
  for (int64_t l = 0; l < hp.n_layer; ++l) n_moe += hp.is_moe_layer(l);
  const int64_t n_dense = hp.n_layer + hp.n_mtp - n_moe;
  SizeBudget b(w);
  b.add("embed_tokens/lm_head [vocab_size, hidden_size]", hp.vocab, d, 2);
  b.add("norms and AttnRes projections [hidden_size]", 1, d, 3 + 6 * hp.n_layer + 5 * hp.n_mtp);
  b.add("MTP eh_proj [hidden_size, 2*hidden_size]", d, 2 * d, hp.n_mtp);

  const KdaHParams& k = hp.kda;
  const int64_t P = k.proj_dim(), K = k.head_dim;
  const char* kda_proj = "KDA q/k/v/g/o_proj [linear_attn_config.num_heads*head_dim, hidden_size]";
  b.add(kda_proj, P, d, 5 * n_kda);
  b.add("KDA conv1d [num_heads*head_dim, short_conv_kernel_size]", P, k.conv_kernel, 3 * n_kda);
  b.add("KDA f_a_proj [linear_attn_config.head_dim, hidden_size]", K, d, n_kda);
  // f_b_proj [P, K] has the size of the recurrent state S [H, K, K] too.
  b.add("KDA f_b_proj/state [num_heads*head_dim, head_dim]", P, K, n_kda);
  b.add("KDA b_proj [linear_attn_config.num_heads, hidden_size]", k.n_head, d, n_kda);
  // A_log at its smallest accepted form [num_heads] (official: padded to head_dim).
  b.add("KDA A_log/dt_bias/o_norm", 1, k.n_head + P + K, n_kda, 3);

  const MlaHParams& a = hp.mla;
  const int64_t H = a.n_head;
  b.add("MLA q_a_proj [q_lora_rank, hidden_size]", a.q_lora_rank, d, n_mla);
  b.add("MLA q_b_proj [num_attention_heads*(qk_nope_head_dim+qk_rope_head_dim), q_lora_rank]",
        sat_mul(H, a.qk_head()), a.q_lora_rank, n_mla);
  b.add("MLA kv_a_proj_with_mqa [kv_lora_rank+qk_rope_head_dim, hidden_size]", a.cache_width(), d,
        n_mla);
  b.add("MLA kv_b_proj [num_attention_heads*(qk_nope_head_dim+v_head_dim), kv_lora_rank]",
        sat_mul(H, a.qk_nope + a.v_head), a.kv_lora_rank, n_mla);
  b.add("MLA g_proj/o_proj [num_attention_heads*v_head_dim, hidden_size]", sat_mul(H, a.v_head), d,
        2 * n_mla);
  b.add("MLA q_a/kv_a layernorms", 1, a.q_lora_rank + a.kv_lora_rank, n_mla, 2);

  b.add("dense FFN gate/up/down_proj [intermediate_size, hidden_size]", hp.d_ff, d, 3 * n_dense);
  const MoeHParams& m = hp.moe;
  if (m.n_expert > 0) {
    b.add("MoE gate [num_experts, hidden_size]", m.n_expert, d, n_moe);
    b.add("MoE gate bias [num_experts]", 1, m.n_expert, n_moe);
    b.add("MoE latent projections [routed_expert_hidden_size, hidden_size]", m.d_latent, d,
          2 * n_moe);
    b.add("MoE latent norm [routed_expert_hidden_size]", 1, m.d_latent, n_moe);
    b.add("MoE shared experts [num_shared_experts*moe_intermediate_size, hidden_size]",
          sat_mul(m.n_shared, m.d_expert), d, 3 * n_moe);
    b.add("MoE routed experts [moe_intermediate_size, routed_expert_hidden_size] x num_experts",
          m.d_expert, m.d_latent, sat_mul(3 * m.n_expert, n_moe),
          m.expert_format == ExpertFormat::mxfp4 ? 2 : 1, m.expert_format == ExpertFormat::mxfp4);
  }
  return b;
}

}  // namespace

int64_t HParams::n_layers_of(AttnKind k) const {
  int64_t n = 0;
  for (AttnKind a : attn_kind) n += a == k;
  return n;
}

// Every field is checked where it is read, before any later field or derived size uses it.
HParams hparams_from_json(const json& top, const std::string& source) {
  K3_CHECK(top.is_object(), source, ": expected a JSON object, found ", top.type_name());
  const json& text = top.contains("text_config") ? top["text_config"] : top;
  K3_CHECK(text.is_object(), source, ": text_config must be an object, found ", text.type_name());
  warn_unknown_fields(top, text, source);
  Fields t(text, source + ": text_config");
  HParams hp;
  hp.vocab = t.integer("vocab_size", 1, kMaxWidth);
  hp.d_model = t.integer("hidden_size", 1, kMaxWidth);
  hp.n_layer = t.integer("num_hidden_layers", 1, kMaxLayers);
  hp.d_ff = t.integer("intermediate_size", 0, kMaxWidth, 0);
  hp.attn_res_block = t.integer("attn_res_block_size", 1, kNoLimit);
  hp.max_positions = t.integer("max_position_embeddings", 1, kMaxPositions, 1 << 20);
  hp.rms_eps = t.number("rms_norm_eps", 1e-5f, Sign::positive);
  hp.situ_beta = t.number("activation_situ_beta", 4.0f, Sign::positive);
  hp.situ_linear_beta = t.number("activation_situ_linear_beta", 25.0f, Sign::positive);
  hp.bos_id = t.token_id("bos_token_id", hp.vocab);
  hp.eos_id = t.token_id("eos_token_id", hp.vocab);
  hp.pad_id = t.token_id("pad_token_id", hp.vocab);

  std::string act = t.string("hidden_act", "situ");
  check(act == "situ", t.where(), ".hidden_act: unknown activation '", act, "' (supported: situ)");
  check(!t.boolean("tie_word_embeddings", false), t.where(),
        ".tie_word_embeddings: tied embeddings are not part of the K3 layout");
  check(t.boolean("mla_use_nope", true), t.where(),
        ".mla_use_nope: only NoPE MLA (no rotary embedding) is supported");
  check(t.boolean("mla_use_output_gate", true), t.where(),
        ".mla_use_output_gate: only gated MLA is supported");
  hp.n_mtp = t.integer("num_nextn_predict_layers", 0, kNoLimit, 0);
  check(hp.n_mtp <= 1, t.where(), ".num_nextn_predict_layers: ", hp.n_mtp,
        " MTP layers; at most 1 is supported (the depth-1 head of docs/TRAINING.md)");

  MlaHParams& a = hp.mla;
  a.n_head = t.integer("num_attention_heads", 1, kMaxWidth);
  int64_t n_kv = t.integer("num_key_value_heads", 1, kMaxWidth, a.n_head);
  check(a.n_head % n_kv == 0, t.where(), ": num_attention_heads (", a.n_head,
        ") is not divisible by num_key_value_heads (", n_kv, ")");
  a.q_lora_rank = t.integer("q_lora_rank", 1, kMaxWidth);
  a.kv_lora_rank = t.integer("kv_lora_rank", 1, kMaxWidth);
  a.qk_nope = t.integer("qk_nope_head_dim", 1, kMaxWidth);
  a.qk_rope = t.integer("qk_rope_head_dim", 0, kMaxWidth, 0);
  a.v_head = t.integer("v_head_dim", 1, kMaxWidth);

  Fields lin(t.object("linear_attn_config"), t.where() + ".linear_attn_config");
  KdaHParams& k = hp.kda;
  k.n_head = lin.integer("num_heads", 1, kMaxWidth);
  k.head_dim = lin.integer("head_dim", 1, kMaxWidth);
  k.conv_kernel = lin.integer("short_conv_kernel_size", 1, kMaxWidth);
  k.gate_lower_bound = lin.number("gate_lower_bound", -5.0f, Sign::negative);
  check(lin.boolean("use_full_rank_gate", true), lin.where(),
        ".use_full_rank_gate: the low-rank g_a/g_b output gate is not supported");
  hp.attn_kind = attn_schedule(lin, hp.n_layer);

  MoeHParams& m = hp.moe;
  m.n_expert = t.integer("num_experts", 0, kMaxWidth, 0);
  check(m.n_expert == 0 || t.has("num_experts_per_token"), t.where(),
        ".num_experts_per_token: missing (the experts used per token, required when num_experts (",
        m.n_expert, ") > 0)");
  m.n_used = t.integer("num_experts_per_token", 0, kMaxWidth, 0);
  check(m.n_expert == 0 || (m.n_used >= 1 && m.n_used <= m.n_expert), t.where(),
        ".num_experts_per_token: expected 1..num_experts (", m.n_expert, "), found ", m.n_used);
  m.n_shared = t.integer("num_shared_experts", 0, kMaxWidth, 0);
  // Expert widths are used only with experts (else 0), but must be well-formed when given.
  for (const char* key : {"moe_intermediate_size", "routed_expert_hidden_size"}) {
    t.integer(key, 0, kMaxWidth, 0);
  }
  if (m.n_expert > 0) {
    m.d_expert = t.integer("moe_intermediate_size", 1, kMaxWidth);
    m.d_latent = t.integer("routed_expert_hidden_size", 1, kMaxWidth);
  }
  m.renormalize = t.boolean("moe_renormalize", true);
  m.routed_scale = t.number("routed_scaling_factor", 1.0f, Sign::positive);
  m.first_dense = t.integer("first_k_dense_replace", 0, hp.n_layer, 0);
  m.layer_freq = t.integer("moe_layer_freq", 1, kNoLimit, 1);
  check(t.boolean("latent_moe_use_norm", true), t.where(),
        ".latent_moe_use_norm: only the Stable (normed) LatentMoE is supported");
  std::string router = t.string("moe_router_activation_func", "sigmoid");
  check(router == "sigmoid", t.where(), ".moe_router_activation_func: unknown '", router,
        "' (supported: sigmoid)");
  int64_t groups = t.integer("num_expert_group", 0, kMaxWidth, 1);
  check(groups <= 1 || (m.n_expert % groups == 0), t.where(), ": num_experts (", m.n_expert,
        ") is not divisible by num_expert_group (", groups, ")");
  check(groups <= 1, t.where(), ".num_expert_group: group-limited routing (", groups,
        " groups) is not supported");
  m.expert_format = expert_format(top, text, source);
  if (m.expert_format == ExpertFormat::mxfp4) {
    check(m.d_latent % 32 == 0 && m.d_expert % 32 == 0, t.where(),
          ": MXFP4 experts need routed_expert_hidden_size (", m.d_latent,
          ") and moe_intermediate_size (", m.d_expert, ") divisible by the group size 32");
  }

  bool any_dense = false;
  for (int64_t l = 0; l < hp.n_layer; ++l) any_dense |= !hp.is_moe_layer(l);
  check(!any_dense || hp.d_ff > 0, t.where(),
        ".intermediate_size: expected a positive integer for the dense FFN layers, found ",
        hp.d_ff);
  budget_of(hp, t.where()).finish();
  return hp;
}

ImpliedSize implied_size(const HParams& hp) { return budget_of(hp, "config").implied(); }

HParams hparams_from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "cannot open ", path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  check(!f.bad(), "cannot read ", path);
  check_json_depth(text, path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the last byte read, where the parser gave up. Its own message says
    // "[json.exception.parse_error.101] parse error at line L, column C: <detail>".
    std::string detail = e.what();
    const size_t at = detail.find("parse error");
    const size_t colon = at == std::string::npos ? at : detail.find(": ", at);
    if (colon != std::string::npos) detail = detail.substr(colon + 2);
    fail(path, ":", text_line_column(text, e.byte > 0 ? e.byte - 1 : 0),
         ": JSON syntax error: ", detail, " (not valid JSON)");
  } catch (const nlohmann::json::exception& e) {
    // Valid syntax the parser still refuses: a number too large for a double (1e705).
    std::string detail = e.what();
    const size_t tag_end = detail.find("] ");
    if (tag_end != std::string::npos) detail = detail.substr(tag_end + 2);
    fail(path, ": ", detail, " (not a usable JSON number)");
  }
  return hparams_from_json(j, path);
}

}  // namespace k3
