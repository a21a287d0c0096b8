// config.json messages a person can act on: a missing required field names its JSON path, an
// unknown field is a warning with the nearest known name, and broken JSON gives file:line:column.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/cli_harness.h"
#include "config/hparams_json.h"
#include "core/error.h"

namespace k3 {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// Collects config warnings while alive; restores the previous sink after.
class CaptureWarnings {
 public:
  CaptureWarnings()
      : prev_(set_config_warning_sink([this](const std::string& m) { got.push_back(m); })) {}
  ~CaptureWarnings() { set_config_warning_sink(prev_); }
  std::vector<std::string> got;

 private:
  ConfigWarningSink prev_;
};

json c1_tiny() {
  const fs::path f = fs::path(K3_SOURCE_DIR) / "tests/data/models/c1_tiny/config.json";
  return json::parse(test::read_file_bytes(f.string()));
}

std::string error_of(const json& config) {
  try {
    hparams_from_json(config, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Renames text_config.<from> to <to> (a typo).
json renamed(json config, const std::string& from, const std::string& to) {
  json& t = config["text_config"];
  t[to] = t[from];
  t.erase(from);
  return config;
}

TEST(ConfigMessages, MisspelledTopKIsMissingAndWarned) {
  CaptureWarnings w;
  const std::string e =
      error_of(renamed(c1_tiny(), "num_experts_per_token", "num_experts_per_tok"));
  EXPECT_EQ(e.rfind("cfg.json: text_config.num_experts_per_token: missing", 0), 0u) << e;
  ASSERT_EQ(w.got.size(), 1u);
  EXPECT_EQ(w.got[0],
            "cfg.json: text_config.num_experts_per_tok is not a known field; did you mean "
            "num_experts_per_token?");
}

TEST(ConfigMessages, MissingTopKWithoutExpertsIsFine) {
  CaptureWarnings w;
  json config = c1_tiny();
  config["text_config"]["num_experts"] = 0;
  config["text_config"].erase("num_experts_per_token");
  EXPECT_EQ(error_of(config), "");
  EXPECT_TRUE(w.got.empty());
}

TEST(ConfigMessages, MissingRequiredFieldNamesIt) {
  CaptureWarnings w;
  json config = c1_tiny();
  config["text_config"]["linear_attn_config"].erase("short_conv_kernel_size");
  const std::string e = error_of(config);
  EXPECT_NE(e.find("text_config.linear_attn_config"), std::string::npos) << e;
  EXPECT_NE(e.find("missing field 'short_conv_kernel_size'"), std::string::npos) << e;
}

TEST(ConfigMessages, UnknownFieldsAreWarningsWithSuggestions) {
  CaptureWarnings w;
  json config = c1_tiny();
  config["text_config"]["linear_attn_config"]["gate_lowerbound"] = -5.0;
  config["text_config"]["Hidden_Act"] = "situ";
  config["text_config"]["my_private_note"] = "hello";
  config["quantization_config"] = {{"quant_methd", "compressed-tensors"},
                                   {"quant_method", "compressed-tensors"},
                                   {"format", "mxfp4-pack-quantized"}};
  EXPECT_EQ(error_of(config), "");  // warnings only
  const std::vector<std::string> want = {
      "cfg.json: text_config.Hidden_Act is not a known field; did you mean hidden_act?",
      "cfg.json: text_config.my_private_note is not a known field; it is ignored",
      "cfg.json: text_config.linear_attn_config.gate_lowerbound is not a known field; did you "
      "mean gate_lower_bound?",
      "cfg.json: quantization_config.quant_methd is not a known field; did you mean "
      "quant_method?",
  };
  EXPECT_EQ(w.got, want);
}

TEST(ConfigMessages, QuantizationConfigInsideTextConfig) {
  CaptureWarnings w;
  json config = c1_tiny();
  config["text_config"]["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                                  {"format", "mxfp4-pack-quantized"},
                                                  {"group_sise", 32}};
  EXPECT_EQ(error_of(config), "");
  ASSERT_EQ(w.got.size(), 1u);
  EXPECT_NE(w.got[0].find("cfg.json: text_config.quantization_config.group_sise"),
            std::string::npos)
      << w.got[0];
}

TEST(ConfigMessages, FlatConfigAcceptsTopLevelFields) {
  CaptureWarnings w;
  json config = c1_tiny();
  json flat = config["text_config"];
  for (const char* k : {"architectures", "media_placeholder_token_id", "vision_config"}) {
    flat[k] = config.contains(k) ? config[k] : json(1);
  }
  EXPECT_EQ(error_of(flat), "");
  EXPECT_TRUE(w.got.empty()) << w.got[0];
}

TEST(ConfigMessages, ShippedConfigsDrawNoWarnings) {
  CaptureWarnings w;
  const fs::path root = K3_SOURCE_DIR;
  size_t n = 0;
  for (const char* dir : {"configs", "tests/data/models", "tests/data/public_golden"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const fs::path& f = e.path();
      if (f.extension() == ".json" && (dir[0] == 'c' || f.filename() == "config.json")) {
        EXPECT_NO_THROW(hparams_from_file(f.string())) << f;
        ++n;
      }
    }
  }
  EXPECT_GE(n, 10u);
  EXPECT_TRUE(w.got.empty()) << w.got.size() << " warnings, first: " << w.got[0];
}

TEST(ConfigMessages, DefaultSinkPrintsToStderrOnce) {
  set_config_warning_sink(nullptr);
  json config = c1_tiny();
  config["text_config"]["num_experts_per_tok"] = 2;
  testing::internal::CaptureStderr();
  hparams_from_json(config, "once.json");
  hparams_from_json(config, "once.json");
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string line =
      "k3: warning: once.json: text_config.num_experts_per_tok is not a known field; did you "
      "mean num_experts_per_token?\n";
  EXPECT_EQ(err, line);
}

TEST(ConfigMessages, LineColumn) {
  EXPECT_EQ(text_line_column("abc", 0), "1:1");
  EXPECT_EQ(text_line_column("abc", 2), "1:3");
  EXPECT_EQ(text_line_column("a\nbc\n", 3), "2:2");
  EXPECT_EQ(text_line_column("a\nbc\n", 5), "3:1");
  EXPECT_EQ(text_line_column("a\n", 99), "2:1");
}

std::string file_error(const std::string& content) {
  test::TempDir tmp;
  const std::string path = tmp.write("config.json", content);
  try {
    hparams_from_file(path);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;  // the file comes first
    return msg.substr(path.size());
  }
  return "";
}

TEST(ConfigMessages, BrokenJsonGivesLineAndColumn) {
  std::string e = file_error("{\n  \"text_config\": {\n    \"vocab_size\": 256,\n    \"x\" 1\n}\n");
  EXPECT_EQ(e.rfind(":4:9: JSON syntax error: ", 0), 0u) << e;
  EXPECT_NE(e.find("expected ':'"), std::string::npos) << e;
  e = file_error("{\n  \"a\": 1,\n}\n");  // trailing comma
  EXPECT_EQ(e.rfind(":3:1: JSON syntax error: ", 0), 0u) << e;
  e = file_error("{ not json");  // the position is where the parser gave up: the 'o'
  EXPECT_EQ(e.rfind(":1:4: JSON syntax error: ", 0), 0u) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  e = file_error("{\"a\": [1, 2\n");  // cut short
  EXPECT_EQ(e.rfind(":2:1: JSON syntax error: ", 0), 0u) << e;
  EXPECT_NE(e.find("end of input"), std::string::npos) << e;
}

// Found by fuzz_config: a number beyond double range is valid JSON syntax, but the parser throws
// out_of_range, which escaped as "internal error".
TEST(ConfigMessages, NumberBeyondDoubleRange) {
  const std::string e = file_error("{\"text_config\": {\"vocab_size\": 1e705}}");
  EXPECT_NE(e.find("number overflow parsing '1e705'"), std::string::npos) << e;
}

}  // namespace
}  // namespace k3
