// Bad input never crashes: each broken checkpoint, config or request makes `k3 logits` exit
// with status 1 and one message naming what is wrong. Each case breaks a copy of c1_tiny.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSource = K3_SOURCE_DIR "/tests/data/models/c1_tiny";
const char* kShard = "model-00001-of-000001.safetensors";

struct CliRun {
  int status = -1;  // exit code, or 128+signal
  std::string err;
};

// ctest runs tests in parallel processes: each gets its own stderr file.
CliRun run_cli(const std::string& args) {
  const std::string err_file =
      fs::temp_directory_path() / ("k3_bad_input_stderr_" + std::to_string(getpid()) + ".txt");
  const std::string cmd = std::string(K3_CLI_PATH) + " " + args + " >/dev/null 2>" + err_file;
  const int raw = std::system(cmd.c_str());
  CliRun r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  std::ifstream f(err_file);
  std::stringstream ss;
  ss << f.rdbuf();
  r.err = ss.str();
  return r;
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    // The pid too: two runs of the suite at once (a build and a CI clone) must not share it.
    dir_ =
        fs::temp_directory_path() /
        ("k3_bad_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
         "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::copy(kSource, dir_);
    for (auto& e : fs::directory_iterator(dir_))
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `k3 logits` on the broken copy; expects exit 1 and every fragment in the message.
  void expect_error(const std::vector<std::string>& fragments, const std::string& ids = "1,2,3") {
    CliRun r = run_cli("logits -m " + dir_.string() + " --ids " + ids + " -o " +
                       (dir_ / "out.npy").string());
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
    for (const std::string& f : fragments)
      EXPECT_NE(r.err.find(f), std::string::npos) << "missing '" << f << "' in: " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out.npy"));
  }

  json read_json(const std::string& name) {
    std::ifstream f(dir_ / name);
    return json::parse(f);
  }
  void write_json(const std::string& name, const json& j) {
    std::ofstream(dir_ / name) << j.dump(1);
  }
  void edit_config(const std::function<void(json&)>& fn) {
    json c = read_json("config.json");
    fn(c["text_config"]);
    write_json("config.json", c);
  }

  // Rewrites the shard's header through fn, keeping the data bytes.
  void edit_header(const std::function<void(json&)>& fn) {
    std::ifstream in(dir_ / kShard, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    json h = json::parse(bytes.substr(8, n));
    fn(h);
    std::string header = h.dump();
    uint64_t m = header.size();
    std::ofstream out(dir_ / kShard, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&m), 8);
    out << header << bytes.substr(8 + n);
  }
  void remove_from_index(const std::string& name) {
    json idx = read_json("model.safetensors.index.json");
    idx["weight_map"].erase(name);
    write_json("model.safetensors.index.json", idx);
  }

  fs::path dir_;
};

const std::string kLayer0 = "language_model.model.layers.0.";

TEST_F(BadInput, TruncatedShard) {
  fs::resize_file(dir_ / kShard, fs::file_size(dir_ / kShard) / 2);
  expect_error({kShard, "past the end"});
}

TEST_F(BadInput, ShardShorterThanItsHeaderLength) {
  fs::resize_file(dir_ / kShard, 100);
  expect_error({kShard, "header length"});
}

TEST_F(BadInput, EmptyShard) {
  fs::resize_file(dir_ / kShard, 0);
  expect_error({kShard, "too short"});
}

TEST_F(BadInput, CorruptHeaderJson) {
  std::fstream f(dir_ / kShard, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(8);
  f.write("#!garbage", 9);
  f.close();
  expect_error({kShard, "corrupt safetensors header"});
}

TEST_F(BadInput, HeaderOffsetsPastTheEnd) {
  const std::string name = kLayer0 + "input_layernorm.weight";
  edit_header([&](json& h) { h[name]["data_offsets"][1] = 1ull << 40; });
  expect_error({name, "past the end"});
}

TEST_F(BadInput, SizeDisagreesWithShape) {
  const std::string name = kLayer0 + "input_layernorm.weight";
  edit_header([&](json& h) { h[name]["shape"] = {7}; });
  expect_error({name, "needs"});
}

TEST_F(BadInput, ShapeThatOverflowsTheSize) {
  const std::string name = kLayer0 + "input_layernorm.weight";
  edit_header([&](json& h) { h[name]["shape"] = {1ll << 62, 1ll << 62, 4}; });
  expect_error({name, "too large"});
}

TEST_F(BadInput, UnsupportedDtype) {
  const std::string name = kLayer0 + "input_layernorm.weight";
  edit_header([&](json& h) { h[name]["dtype"] = "I64"; });
  expect_error({name, "unsupported dtype 'I64'"});
}

TEST_F(BadInput, WrongDtypeForTheRole) {
  const std::string name = kLayer0 + "input_layernorm.weight";
  edit_header([&](json& h) { h[name]["dtype"] = "F16"; });  // same size, wrong type
  expect_error({name, "wrong dtype", "expected BF16, found F16"});
}

TEST_F(BadInput, MissingTensor) {
  const std::string name = kLayer0 + "self_attn.q_proj.weight";
  edit_header([&](json& h) { h.erase(name); });
  remove_from_index(name);
  expect_error({"1 missing tensor", name});
}

TEST_F(BadInput, IndexListsATensorTheShardLacks) {
  const std::string name = kLayer0 + "self_attn.q_proj.weight";
  edit_header([&](json& h) { h.erase(name); });
  expect_error({"model.safetensors.index.json", name, "no such tensor"});
}

TEST_F(BadInput, AllProblemsReportedTogether) {
  const std::string gone = kLayer0 + "self_attn.k_proj.weight";
  const std::string extra = kLayer0 + "self_attn.surprise.weight";
  edit_header([&](json& h) {
    h[extra] = h[gone];
    h.erase(gone);
    h[kLayer0 + "post_attention_layernorm.weight"]["dtype"] = "F16";
  });
  remove_from_index(gone);
  expect_error({"missing tensor", gone, "unexpected tensor", extra, "wrong dtype"});
}

TEST_F(BadInput, MisShapedTensor) {
  // Swap the shapes of two same-sized tensors: sizes stay consistent, roles do not.
  const std::string name = kLayer0 + "self_attn.f_b_proj.weight";  // [P, K]
  edit_header([&](json& h) {
    auto s = h[name]["shape"];
    h[name]["shape"] = {s[1], s[0]};
  });
  expect_error({"mis-shaped", name});
}

TEST_F(BadInput, MissingShardFile) {
  fs::remove(dir_ / kShard);
  expect_error({"does not exist"});
}

TEST_F(BadInput, MissingConfig) {
  fs::remove(dir_ / "config.json");
  expect_error({"no config.json"});
}

TEST_F(BadInput, ConfigNotJson) {
  std::ofstream(dir_ / "config.json") << "{ not json";
  expect_error({"config.json", "not valid JSON"});
}

TEST_F(BadInput, OverlappingLayerNumbers) {
  edit_config([](json& t) { t["linear_attn_config"]["kda_layers"].push_back(4); });
  expect_error({"layer 4", "listed twice"});
}

TEST_F(BadInput, MissingLayerNumber) {
  edit_config([](json& t) { t["linear_attn_config"]["kda_layers"] = {1, 3}; });
  expect_error({"layer 2", "neither"});
}

TEST_F(BadInput, LayerNumberOutOfRange) {
  edit_config([](json& t) { t["linear_attn_config"]["full_attn_layers"] = {4, 9}; });
  expect_error({"layer 9", "outside"});
}

TEST_F(BadInput, HeadsNotDividing) {
  edit_config([](json& t) { t["num_key_value_heads"] = 3; });
  expect_error({"num_attention_heads", "not divisible", "num_key_value_heads"});
}

TEST_F(BadInput, UnknownActivation) {
  edit_config([](json& t) { t["hidden_act"] = "gelu"; });
  expect_error({"hidden_act", "unknown activation 'gelu'"});
}

TEST_F(BadInput, FieldOfTheWrongType) {
  edit_config([](json& t) { t["hidden_size"] = "wide"; });
  expect_error({"hidden_size", "positive integer"});
}

TEST_F(BadInput, TopKAboveExpertCount) {
  edit_config([](json& t) { t["num_experts_per_token"] = 99; });
  expect_error({"num_experts_per_token"});
}

TEST_F(BadInput, TokenIdOutOfRange) { expect_error({"token id 256", "vocabulary"}, "1,256"); }

TEST_F(BadInput, NegativeTokenId) { expect_error({"token id -1", "vocabulary"}, "3,-1"); }

TEST_F(BadInput, MalformedIdList) { expect_error({"--ids", "'x' is not an integer"}, "1,x"); }

// Issue 9, bug 4: JSON nested 100,000 deep used to overflow the stack (SIGSEGV) while a passing
// check printed it; now the depth is limited before parsing.
const std::string kDeepJson = std::string(100000, '[') + std::string(100000, ']');

TEST_F(BadInput, DeeplyNestedHeaderJson) {
  const std::string name = kLayer0 + "input_layernorm.weight";
  edit_header([&](json& h) { h[name]["shape"] = "PLACEHOLDER"; });
  std::ifstream in(dir_ / kShard, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  std::string header = bytes.substr(8, n);
  header.replace(header.find("\"PLACEHOLDER\""), 13, kDeepJson);
  const uint64_t m = header.size();
  std::ofstream out(dir_ / kShard, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&m), 8);
  out << header << bytes.substr(8 + n);
  out.close();
  expect_error({kShard, "nested deeper than 128"});
}

TEST_F(BadInput, DeeplyNestedConfigField) {
  json c = read_json("config.json");
  c["text_config"]["hidden_size"] = "PLACEHOLDER";
  std::string text = c.dump();
  text.replace(text.find("\"PLACEHOLDER\""), 13, kDeepJson);
  std::ofstream(dir_ / "config.json") << text;
  expect_error({"config.json", "nested deeper than 128"});
}

// Issue 9, bug 3: a small checkpoint whose config declares huge layer or expert counts is
// rejected by comparing with what its shards hold, before a table of millions of tensors is
// built (the fixed limits alone let both configs through).
TEST_F(BadInput, MoreLayersThanTheShardsHold) {
  edit_config([](json& t) {
    const int n = 60000;
    t["num_hidden_layers"] = n;
    json kda = json::array();
    for (int l = 1; l < n; ++l) kda.push_back(l);
    t["linear_attn_config"]["kda_layers"] = kda;
    t["linear_attn_config"]["full_attn_layers"] = {n};
    t["first_k_dense_replace"] = n;  // no MoE layers: the count alone must be caught
  });
  expect_error({"num_hidden_layers 60000", "the shards hold only"});
}

TEST_F(BadInput, MoreExpertsThanTheShardsHold) {
  edit_config([](json& t) {
    t["num_experts"] = 500000;
    t["moe_layer_freq"] = 3;  // one MoE layer (layer 3): 1.5 million expert tensors
  });
  expect_error({"num_experts 500000", "the shards hold only"});
}

TEST_F(BadInput, MoreBytesThanTheShardsHold) {
  edit_config([](json& t) { t["intermediate_size"] = 1 << 20; });  // same tensors, far larger
  expect_error({"config.json implies at least", "bytes of tensor data"});
}

// Issue 9, bug 6: a legal file whose data section starts at an odd offset. Its tensors are
// copied once into aligned memory (a note says so) and give the same logits as the original.
TEST_F(BadInput, MisalignedDataSectionGivesTheSameLogits) {
  const fs::path aligned = dir_ / "aligned.npy", odd = dir_ / "odd.npy";
  const std::string args = " --ids 1,2,3,4,5 -o ";
  CliRun r = run_cli("logits -m " + dir_.string() + args + aligned.string());
  ASSERT_EQ(r.status, 0) << r.err;
  edit_header([](json&) {});  // compact header: its length decides the data offset
  std::ifstream in(dir_ / kShard, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  const uint64_t pad = (8 + n) % 2 == 0 ? 1 : 0;  // JSON allows trailing spaces
  const uint64_t m = n + pad;
  ASSERT_EQ((8 + m) % 2, 1u);
  std::ofstream out(dir_ / kShard, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&m), 8);
  out << bytes.substr(8, n) << std::string(pad, ' ') << bytes.substr(8 + n);
  out.close();
  r = run_cli("logits -m " + dir_.string() + args + odd.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("not aligned to their element size"), std::string::npos) << r.err;
  std::ifstream fa(aligned, std::ios::binary), fo(odd, std::ios::binary);
  const std::string a((std::istreambuf_iterator<char>(fa)), {});
  const std::string o((std::istreambuf_iterator<char>(fo)), {});
  ASSERT_GT(a.size(), 128u);
  EXPECT_TRUE(a == o) << "logits differ between the aligned and the misaligned file";
}

TEST(BadCommandLine, UnknownOptionAndMissingModel) {
  CliRun r = run_cli("logits --bogus 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unknown option '--bogus'"), std::string::npos) << r.err;
  r = run_cli("inspect stray-word");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unexpected argument 'stray-word'"), std::string::npos) << r.err;
  r = run_cli("logits --ids 1 -o /tmp/x.npy -m /nonexistent/k3");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

}  // namespace
