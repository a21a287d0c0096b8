// config.json validation: every field hparams_from_json reads, and every size derived from them,
// is checked before use. Each case breaks one field of a valid c1_tiny-shaped config and expects
// a k3::Error naming the field's JSON path; the CLI turns such a config into exit 1, no crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/cli_harness.h"
#include "config/hparams_json.h"
#include "core/error.h"

namespace k3 {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// c1_tiny's config (tests/data/models/c1_tiny): 4 layers KKKM, layer 0 dense, 4 experts.
json base_config() {
  return json::parse(R"({
  "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
  "text_config": {
    "model_type": "kimi_linear", "vocab_size": 256, "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 2,
    "num_key_value_heads": 2, "hidden_act": "situ", "activation_situ_beta": 4.0,
    "activation_situ_linear_beta": 25.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": false,
    "max_position_embeddings": 1048576, "q_lora_rank": 24, "kv_lora_rank": 16,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "mla_use_nope": true,
    "mla_use_output_gate": true, "num_experts": 4, "num_experts_per_token": 2,
    "num_shared_experts": 1, "moe_intermediate_size": 32, "routed_expert_hidden_size": 32,
    "latent_moe_use_norm": true, "moe_router_activation_func": "sigmoid",
    "moe_renormalize": true, "routed_scaling_factor": 1.0, "num_expert_group": 1,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "num_nextn_predict_layers": 0,
    "attn_res_block_size": 2,
    "linear_attn_config": {"num_heads": 2, "head_dim": 16, "short_conv_kernel_size": 4,
      "gate_lower_bound": -5.0, "use_full_rank_gate": true, "full_attn_layers": [4],
      "kda_layers": [1, 2, 3]},
    "bos_token_id": 128, "eos_token_id": 130, "pad_token_id": 255
  }
})");
}

// The error hparams_from_json reports for `config`, or "" when it is accepted.
std::string error_of(const json& config) {
  try {
    hparams_from_json(config, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One broken field: `path` is the JSON pointer below text_config; `value` replaces it, or the
// field is removed when `remove` is set. The message must contain every fragment.
struct Case {
  const char* name;
  std::string path;
  json value;
  std::vector<std::string> fragments;
  bool remove = false;
};

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
const int64_t kHuge = int64_t{1} << 40;

std::vector<Case> cases() {
  const std::string p = "text_config.", lin = "text_config.linear_attn_config.";
  std::vector<Case> c = {
      {"MoeLayerFreqZero", "/moe_layer_freq", 0, {p + "moe_layer_freq", "found 0"}},
      {"MoeLayerFreqNegative", "/moe_layer_freq", -2, {p + "moe_layer_freq", "found -2"}},
      {"MoeLayerFreqFraction", "/moe_layer_freq", 1.5, {p + "moe_layer_freq", "found 1.5"}},
      {"VocabZero", "/vocab_size", 0, {p + "vocab_size", "positive integer"}},
      {"VocabString", "/vocab_size", "256", {p + "vocab_size", "found \"256\""}},
      {"VocabFloat", "/vocab_size", 1e30, {p + "vocab_size"}},
      {"VocabHuge", "/vocab_size", kHuge, {p + "vocab_size", "<= 16777216"}},
      {"VocabUnsignedMax", "/vocab_size", std::numeric_limits<uint64_t>::max(), {p + "vocab_size"}},
      {"HiddenSizeZero", "/hidden_size", 0, {p + "hidden_size"}},
      {"HiddenSize1e12", "/hidden_size", int64_t{1000000000000}, {p + "hidden_size"}},
      {"HiddenSizeBool", "/hidden_size", true, {p + "hidden_size", "found true"}},
      {"LayersZero", "/num_hidden_layers", 0, {p + "num_hidden_layers"}},
      {"LayersHuge", "/num_hidden_layers", kHuge, {p + "num_hidden_layers"}},
      {"DenseWidthNegative", "/intermediate_size", -1, {p + "intermediate_size"}},
      {"DenseWidthZero", "/intermediate_size", 0, {p + "intermediate_size", "dense"}},
      {"AttnResBlockZero", "/attn_res_block_size", 0, {p + "attn_res_block_size"}},
      {"AttnResBlockNegative", "/attn_res_block_size", -4, {p + "attn_res_block_size"}},
      {"MaxPositionsZero", "/max_position_embeddings", 0, {p + "max_position_embeddings"}},
      {"MaxPositionsHuge",
       "/max_position_embeddings",
       int64_t{1} << 50,
       {p + "max_position_embeddings"}},
      {"RmsEpsZero", "/rms_norm_eps", 0.0, {p + "rms_norm_eps", "positive"}},
      {"RmsEpsNegative", "/rms_norm_eps", -1e-5, {p + "rms_norm_eps"}},
      {"RmsEpsUnderflowsFloat", "/rms_norm_eps", 1e-50, {p + "rms_norm_eps"}},
      {"RmsEpsOverflowsFloat", "/rms_norm_eps", 1e300, {p + "rms_norm_eps"}},
      {"RmsEpsNaN", "/rms_norm_eps", kNaN, {p + "rms_norm_eps"}},
      {"RmsEpsString", "/rms_norm_eps", "1e-5", {p + "rms_norm_eps"}},
      {"SituBetaZero", "/activation_situ_beta", 0, {p + "activation_situ_beta"}},
      {"SituBetaInf", "/activation_situ_beta", kInf, {p + "activation_situ_beta"}},
      {"SituLinearBetaNegative",
       "/activation_situ_linear_beta",
       -25.0,
       {p + "activation_situ_linear_beta"}},
      {"BosAtVocab", "/bos_token_id", 256, {p + "bos_token_id", "0..255", "found 256"}},
      {"EosBelowMinusOne", "/eos_token_id", -2, {p + "eos_token_id", "found -2"}},
      {"PadHuge", "/pad_token_id", kHuge, {p + "pad_token_id"}},
      {"PadString", "/pad_token_id", "255", {p + "pad_token_id"}},
      {"HiddenActNotString", "/hidden_act", 5, {p + "hidden_act", "string"}},
      {"TieEmbeddingsString", "/tie_word_embeddings", "no", {p + "tie_word_embeddings"}},
      {"MtpLayersTwo",
       "/num_nextn_predict_layers",
       2,
       {p + "num_nextn_predict_layers", "at most 1"}},
      {"MtpLayersNegative", "/num_nextn_predict_layers", -1, {p + "num_nextn_predict_layers"}},
      {"HeadsZero", "/num_attention_heads", 0, {p + "num_attention_heads"}},
      {"KvHeadsZero", "/num_key_value_heads", 0, {p + "num_key_value_heads"}},
      {"KvHeadsNotDividing", "/num_key_value_heads", 3, {"num_key_value_heads", "divisible"}},
      {"QLoraZero", "/q_lora_rank", 0, {p + "q_lora_rank"}},
      {"KvLoraZero", "/kv_lora_rank", 0, {p + "kv_lora_rank"}},
      {"KvLoraNegative", "/kv_lora_rank", -16, {p + "kv_lora_rank"}},
      {"QkNopeZero", "/qk_nope_head_dim", 0, {p + "qk_nope_head_dim"}},
      {"QkRopeNegative", "/qk_rope_head_dim", -8, {p + "qk_rope_head_dim"}},
      {"VHeadZero", "/v_head_dim", 0, {p + "v_head_dim"}},
      {"LinearAttnNotObject", "/linear_attn_config", "kda", {p + "linear_attn_config", "object"}},
      {"KdaHeadsZero", "/linear_attn_config/num_heads", 0, {lin + "num_heads"}},
      {"KdaHeadDimZero", "/linear_attn_config/head_dim", 0, {lin + "head_dim"}},
      {"KdaHeadDimNegative", "/linear_attn_config/head_dim", -16, {lin + "head_dim"}},
      {"ConvKernelZero",
       "/linear_attn_config/short_conv_kernel_size",
       0,
       {lin + "short_conv_kernel_size"}},
      {"GateBoundZero", "/linear_attn_config/gate_lower_bound", 0, {lin + "gate_lower_bound"}},
      {"GateBoundPositive",
       "/linear_attn_config/gate_lower_bound",
       5.0,
       {lin + "gate_lower_bound", "negative"}},
      {"GateBoundMinusInf",
       "/linear_attn_config/gate_lower_bound",
       -1e300,
       {lin + "gate_lower_bound"}},
      {"GateBoundNaN", "/linear_attn_config/gate_lower_bound", kNaN, {lin + "gate_lower_bound"}},
      {"FullRankGateString",
       "/linear_attn_config/use_full_rank_gate",
       "yes",
       {lin + "use_full_rank_gate"}},
      {"KdaLayersNotList", "/linear_attn_config/kda_layers", 3, {lin + "kda_layers"}},
      {"KdaLayersStrings", "/linear_attn_config/kda_layers", {"1", "2", "3"}, {lin + "kda_layers"}},
      {"ExpertsNegative", "/num_experts", -1, {p + "num_experts"}},
      {"TopKZero", "/num_experts_per_token", 0, {p + "num_experts_per_token", "1..num_experts"}},
      {"TopKAboveExperts", "/num_experts_per_token", 5, {p + "num_experts_per_token", "found 5"}},
      {"SharedNegative", "/num_shared_experts", -1, {p + "num_shared_experts"}},
      {"ExpertWidthZero", "/moe_intermediate_size", 0, {p + "moe_intermediate_size"}},
      {"LatentWidthZero", "/routed_expert_hidden_size", 0, {p + "routed_expert_hidden_size"}},
      {"LatentWidthMissing",
       "/routed_expert_hidden_size",
       nullptr,
       {"missing field 'routed_expert_hidden_size'"},
       true},
      {"RoutedScaleZero", "/routed_scaling_factor", 0.0, {p + "routed_scaling_factor"}},
      {"RoutedScaleNegative", "/routed_scaling_factor", -1.0, {p + "routed_scaling_factor"}},
      {"RoutedScaleOverflowsFloat", "/routed_scaling_factor", 1e39, {p + "routed_scaling_factor"}},
      {"RoutedScaleNaN", "/routed_scaling_factor", kNaN, {p + "routed_scaling_factor"}},
      {"RoutedScaleString", "/routed_scaling_factor", "1.0", {p + "routed_scaling_factor"}},
      {"FirstDenseNegative", "/first_k_dense_replace", -1, {p + "first_k_dense_replace"}},
      {"FirstDensePastLastLayer",
       "/first_k_dense_replace",
       5,
       {p + "first_k_dense_replace", "<= 4"}},
      {"RenormalizeNumber", "/moe_renormalize", 1, {p + "moe_renormalize"}},
      {"RouterActivation",
       "/moe_router_activation_func",
       "softmax",
       {p + "moe_router_activation_func"}},
      {"ExpertGroupsNegative", "/num_expert_group", -1, {p + "num_expert_group"}},
      {"ExpertGroups", "/num_expert_group", 2, {p + "num_expert_group"}},
      {"QuantInTextNotObject",
       "/quantization_config",
       "mxfp4",
       {"text_config.quantization_config", "object"}},
      {"QuantMethodNumber",
       "/quantization_config",
       {{"quant_method", 5}},
       {"quantization_config.quant_method", "string"}},
      {"HiddenSizeRequired", "/hidden_size", nullptr, {"missing field 'hidden_size'"}, true},
      {"KdaHeadDimRequired",
       "/linear_attn_config/head_dim",
       nullptr,
       {"linear_attn_config", "missing field 'head_dim'"},
       true},
  };
  return c;
}

class BadField : public ::testing::TestWithParam<Case> {};

TEST_P(BadField, ThrowsNamingTheField) {
  const Case& c = GetParam();
  json config = base_config();
  const json::json_pointer ptr("/text_config" + c.path);
  if (c.remove) {
    config[ptr.parent_pointer()].erase(ptr.back());
  } else {
    config[ptr] = c.value;
  }
  const std::string err = error_of(config);
  ASSERT_FALSE(err.empty()) << c.path << " = " << c.value.dump() << " was accepted";
  EXPECT_EQ(err.rfind("cfg.json", 0), 0u) << err;
  for (const std::string& f : c.fragments) {
    EXPECT_NE(err.find(f), std::string::npos) << "missing '" << f << "' in: " << err;
  }
}

INSTANTIATE_TEST_SUITE_P(ConfigValidation, BadField, ::testing::ValuesIn(cases()),
                         [](const auto& i) { return std::string(i.param.name); });

TEST(ConfigValidation, BaseConfigIsValid) {
  const HParams hp = hparams_from_json(base_config(), "cfg.json");
  EXPECT_EQ(hp.n_layer, 4);
  EXPECT_EQ(hp.moe.layer_freq, 1);
  EXPECT_EQ(hp.pad_id, 255);
}

TEST(ConfigValidation, ShippedConfigsAreValid) {
  const fs::path root = K3_SOURCE_DIR;
  std::vector<fs::path> files;
  for (const char* dir : {"configs", "tests/data/models", "tests/data/public_golden"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const fs::path& f = e.path();
      if (f.extension() == ".json" && (dir[0] == 'c' || f.filename() == "config.json")) {
        files.push_back(f);
      }
    }
  }
  EXPECT_GE(files.size(), 10u);
  for (const fs::path& f : files) EXPECT_NO_THROW(hparams_from_file(f.string())) << f;
}

TEST(ConfigValidation, AbsentOrMinusOneTokenIdsMeanNone) {
  json config = base_config();
  config["text_config"]["bos_token_id"] = -1;
  config["text_config"]["eos_token_id"] = nullptr;
  config["text_config"].erase("pad_token_id");
  const HParams hp = hparams_from_json(config, "cfg.json");
  EXPECT_EQ(hp.bos_id, -1);
  EXPECT_EQ(hp.eos_id, -1);
  EXPECT_EQ(hp.pad_id, -1);
}

TEST(ConfigValidation, DenseConfigIgnoresTopK) {
  // num_experts 0: no MoE layers, so top-k and the expert widths are not used (but still typed).
  json config = base_config();
  config["text_config"]["num_experts"] = 0;
  config["text_config"]["num_experts_per_token"] = 8;
  config["text_config"]["moe_layer_freq"] = 3;
  const HParams hp = hparams_from_json(config, "cfg.json");
  EXPECT_FALSE(hp.is_moe_layer(3));
  config["text_config"]["moe_layer_freq"] = 0;
  EXPECT_NE(error_of(config).find("moe_layer_freq"), std::string::npos);
}

TEST(ConfigValidation, MoeLayerFreqSchedulesLayers) {
  json config = base_config();
  config["text_config"]["moe_layer_freq"] = 2;
  const HParams hp = hparams_from_json(config, "cfg.json");
  EXPECT_FALSE(hp.is_moe_layer(0));
  EXPECT_TRUE(hp.is_moe_layer(2));
  EXPECT_FALSE(hp.is_moe_layer(3));
}

// Products of individually plausible widths that would overflow or be absurd as tensor sizes.
TEST(ConfigValidation, AbsurdDerivedSizes) {
  const int64_t wide = int64_t{1} << 24;  // the largest accepted single width
  auto with = [&](const std::vector<std::pair<std::string, json>>& edits) {
    json config = base_config();
    for (const auto& [ptr, v] : edits) config[json::json_pointer("/text_config" + ptr)] = v;
    return error_of(config);
  };
  std::string e = with({{"/vocab_size", wide}, {"/hidden_size", wide}});
  EXPECT_NE(e.find("[vocab_size, hidden_size]"), std::string::npos) << e;
  EXPECT_NE(e.find("per tensor"), std::string::npos) << e;
  e = with({{"/linear_attn_config/num_heads", wide}, {"/linear_attn_config/head_dim", wide}});
  EXPECT_NE(e.find("num_heads*head_dim"), std::string::npos) << e;
  e = with({{"/num_attention_heads", wide}, {"/qk_nope_head_dim", wide}, {"/q_lora_rank", wide}});
  EXPECT_NE(e.find("num_attention_heads"), std::string::npos) << e;
  e = with({{"/moe_intermediate_size", wide}, {"/routed_expert_hidden_size", wide}});
  EXPECT_NE(e.find("moe_intermediate_size"), std::string::npos) << e;
  e = with({{"/num_experts", wide}, {"/num_experts_per_token", 2}});
  EXPECT_NE(e.find("tensors"), std::string::npos) << e;
  EXPECT_NE(e.find("num_experts"), std::string::npos) << e;
  e = with({{"/num_experts", 1 << 20},
            {"/moe_intermediate_size", 1 << 14},
            {"/routed_expert_hidden_size", 1 << 14}});
  EXPECT_NE(e.find("parameters"), std::string::npos) << e;
}

TEST(ConfigValidation, QuantizationConfig) {
  json config = base_config();
  config["quantization_config"] = "mxfp4";
  EXPECT_NE(error_of(config).find("cfg.json: quantization_config: expected an object"),
            std::string::npos);
  config["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                   {"format", "mxfp4-pack-quantized"},
                                   {"config_groups", {{"g", {{"weights", {{"group_size", 16}}}}}}}};
  const std::string e = error_of(config);
  EXPECT_NE(e.find("config_groups.g.weights.group_size"), std::string::npos) << e;
  config["quantization_config"]["config_groups"]["g"]["weights"]["group_size"] = 32;
  EXPECT_EQ(hparams_from_json(config, "cfg.json").moe.expert_format, ExpertFormat::mxfp4);
  config["text_config"]["routed_expert_hidden_size"] = 48;  // not a multiple of 32
  EXPECT_NE(error_of(config).find("routed_expert_hidden_size (48)"), std::string::npos);
}

TEST(ConfigValidation, NotObjects) {
  EXPECT_NE(error_of(json::array()).find("cfg.json: expected a JSON object"), std::string::npos);
  json config = base_config();
  config["text_config"] = json::array();
  EXPECT_NE(error_of(config).find("text_config must be an object"), std::string::npos);
}

// End to end: the CLI reports a bad config.json with exit 1 and one message, never a signal.
class BadConfigCli : public ::testing::TestWithParam<std::pair<std::string, json>> {};

TEST_P(BadConfigCli, ExitsOneNamingTheField) {
  const auto& [field, value] = GetParam();
  test::TempDir tmp;
  const fs::path dir = fs::path(tmp.path()) / "model";
  fs::copy(fs::path(K3_SOURCE_DIR) / "tests/data/models/c1_tiny", dir);
  fs::permissions(dir / "config.json", fs::perms::owner_write, fs::perm_options::add);
  json config = json::parse(test::read_file_bytes((dir / "config.json").string()));
  config[json::json_pointer("/text_config/" + field)] = value;
  std::ofstream(dir / "config.json", std::ios::trunc) << config.dump(1);

  const std::string out = (dir / "X.npy").string();
  test::CliResult r = test::run_k3({"logits", "-m", dir.string(), "--ids", "1,2", "-o", out});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::string path = "config.json: text_config." + field;
  std::replace(path.begin(), path.end(), '/', '.');
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("error:"), r.err.rfind("error:")) << "one message expected: " << r.err;
  EXPECT_FALSE(fs::exists(out));
}

INSTANTIATE_TEST_SUITE_P(
    ConfigValidation, BadConfigCli,
    ::testing::Values(std::pair<std::string, json>{"moe_layer_freq", 0},
                      std::pair<std::string, json>{"hidden_size", int64_t{1000000000000}},
                      std::pair<std::string, json>{"linear_attn_config/head_dim", 0},
                      std::pair<std::string, json>{"rms_norm_eps", -1.0}),
    [](const auto& i) {
      std::string n = i.param.first;
      for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return n;
    });

}  // namespace
}  // namespace k3
