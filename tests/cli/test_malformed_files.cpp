// Issue 9, point 4: every entry point that reads a file exits 1 with one message naming the file
// and what is wrong in it: inspect and logits (config.json, shards), run (generation_config.json),
// chat (tokenizer_config.json), tokenize (tiktoken.model), perplexity (the text file) and
// cost --config / --hw. Each case breaks one file of a tiny model made by `k3 init`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/cli_harness.h"
#include "common/tiny_model.h"

namespace k3::test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

class MalformedFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = new TempDir;
    model_ = make_tiny_chat_model(*base_);
  }
  static void TearDownTestSuite() { delete base_; }
  void SetUp() override { fs::copy(model_, m_, fs::copy_options::recursive); }

  // Runs k3; expects exit 1 and a single "error:" line holding every fragment.
  static void expect_rejected(const std::vector<std::string>& args,
                              const std::vector<std::string>& fragments,
                              const std::string& stdin_data = "") {
    const CliResult r = run_k3(args, stdin_data);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const size_t at = r.err.find("error:");
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("error:", at + 1), std::string::npos)
        << "more than one message: " << r.err;
    for (const std::string& f : fragments) {
      EXPECT_NE(r.err.find(f), std::string::npos) << "missing '" << f << "' in: " << r.err;
    }
  }
  void edit_text_config(const std::function<void(json&)>& fn) const {
    std::ifstream in(m_ + "/config.json");
    json c = json::parse(in);
    fn(c["text_config"]);
    std::ofstream(m_ + "/config.json") << c.dump(1);
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(m_ + "/" + name, std::ios::binary) << text;
  }

  static TempDir* base_;
  static std::string model_;
  TempDir dir_;
  const std::string m_ = dir_.file("m");
};
TempDir* MalformedFiles::base_ = nullptr;
std::string MalformedFiles::model_;

TEST_F(MalformedFiles, InspectConfigNestedTooDeep) {
  write("config.json", "{\"text_config\": " + nested(100000) + "}");
  expect_rejected({"inspect", "-m", m_}, {"config.json", "nested deeper than 128"});
}

TEST_F(MalformedFiles, InspectConfigFieldOfTheWrongType) {
  edit_text_config([](json& t) { t["num_attention_heads"] = {1, 2}; });
  expect_rejected({"inspect", "-m", m_}, {"config.json", "num_attention_heads", "[1,2]"});
}

TEST_F(MalformedFiles, LogitsConfigWithHugeLayerCount) {
  edit_text_config([](json& t) { t["num_hidden_layers"] = int64_t{1} << 62; });
  expect_rejected({"logits", "-m", m_, "--ids", "1,2", "-o", dir_.file("o.npy")},
                  {"config.json", "num_hidden_layers"});
}

TEST_F(MalformedFiles, LogitsIndexNestedTooDeep) {
  write("model.safetensors.index.json", "{\"weight_map\": " + nested(100000) + "}");
  expect_rejected({"logits", "-m", m_, "--ids", "1,2", "-o", dir_.file("o.npy")},
                  {"model.safetensors.index.json", "nested deeper than 128"});
}

TEST_F(MalformedFiles, RunGenerationConfigFieldOfTheWrongType) {
  write("generation_config.json", R"({"temperature": "hot"})");
  expect_rejected({"run", "-m", m_, "-p", "hi", "-n", "1"},
                  {"generation_config.json", "temperature"});
}

TEST_F(MalformedFiles, RunGenerationConfigNumberOutOfRange) {
  write("generation_config.json", R"({"top_k": 1e300})");  // cast to int: undefined before
  expect_rejected({"run", "-m", m_, "-p", "hi", "-n", "1"},
                  {"generation_config.json", "top_k", "integer in range", "1e+300"});
}

TEST_F(MalformedFiles, RunGenerationConfigNestedTooDeep) {
  write("generation_config.json", "{\"top_k\": " + nested(100000) + "}");
  expect_rejected({"run", "-m", m_, "-p", "hi", "-n", "1"},
                  {"generation_config.json", "nested deeper than 128"});
}

TEST_F(MalformedFiles, ChatTokenizerConfigNestedTooDeep) {
  write("tokenizer_config.json", nested(100000));
  expect_rejected({"chat", "-m", m_, "-n", "1"}, {"tokenizer_config.json", "nested"}, "hi\n");
}

TEST_F(MalformedFiles, TokenizeBrokenVocabularyLine) {
  std::ifstream in(m_ + "/tiktoken.model");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  text.replace(0, text.find('\n'), "@@@ 0");
  write("tiktoken.model", text);
  expect_rejected({"tokenize", "-m", m_, "-p", "hi"}, {"tiktoken.model:1", "base64"});
}

TEST_F(MalformedFiles, PerplexityTextNotUtf8) {
  const std::string text = dir_.write("bad.txt", "ab\xff\xfe cd");
  expect_rejected({"perplexity", "-m", m_, "-f", text}, {"bad.txt", "UTF-8", "offset 2"});
}

TEST_F(MalformedFiles, CostConfigNestedTooDeep) {
  const std::string cfg = dir_.write("deep.json", "{\"text_config\": " + nested(100000) + "}");
  expect_rejected({"cost", "--config", cfg}, {"deep.json", "nested deeper than 128"});
}

TEST_F(MalformedFiles, CostConfigWithTooManyTensors) {
  // 10^6 experts x 63 MoE layers: refused from the counts alone, before any table is listed.
  std::ifstream in(m_ + "/config.json");
  json c = json::parse(in);
  json& t = c["text_config"];
  t["num_experts"] = 1000000;
  t["num_hidden_layers"] = 64;
  json kda = json::array();
  for (int l = 1; l < 64; ++l) kda.push_back(l);
  t["linear_attn_config"]["kda_layers"] = kda;
  t["linear_attn_config"]["full_attn_layers"] = {64};
  const std::string cfg = dir_.write("huge.json", c.dump());
  expect_rejected({"cost", "--config", cfg}, {"huge.json", "tensors", "more than the limit"});
}

TEST_F(MalformedFiles, CostHardwareFileNestedTooDeep) {
  const std::string hw = dir_.write("hw.json", "{\"name\": " + nested(100000) + "}");
  expect_rejected({"cost", "--config", m_ + "/config.json", "--hw", hw},
                  {"hw.json", "nested deeper than 128"});
}

}  // namespace
}  // namespace k3::test
