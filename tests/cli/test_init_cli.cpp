// `k3 init`, `k3 inspect`, `k3 logits` as users run them.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "k3/k3.h"
#include "k3/npy.h"

namespace {
namespace fs = std::filesystem;

struct Result {
  int status;
  std::string out;
};

Result k3(const std::string& args) {
  const fs::path log =
      fs::temp_directory_path() / ("k3_cli_test_out_" + std::to_string(getpid()) + ".txt");
  const int raw =
      std::system((std::string(K3_CLI_PATH) + " " + args + " >" + log.string() + " 2>&1").c_str());
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), ss.str()};
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

const std::string kConfig = K3_SOURCE_DIR "/tests/data/models/c2_13layer/config.json";

class Init : public ::testing::Test {
 protected:
  fs::path tmp(const std::string& name) {
    // The pid too: two runs of the suite at once must not share it.
    fs::path p =
        fs::temp_directory_path() / ("k3_init_test_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(p);
    made_.push_back(p);
    return p;
  }
  void TearDown() override {
    for (auto& p : made_) fs::remove_all(p);
  }
  std::vector<fs::path> made_;
};

TEST_F(Init, WritesALoadableWellScaledCheckpoint) {
  fs::path dir = tmp("scaled");
  Result r = k3("init --config " + kConfig + " -o " + dir.string() + " --seed 3 --mxfp4");
  ASSERT_EQ(r.status, 0) << r.out;
  auto model = k3::Model::load(dir.string());
  k3::Sequence seq(*model);
  std::vector<int64_t> ids;
  for (int i = 0; i < 70; ++i) ids.push_back((i * 37) % model->vocab_size());
  std::vector<float> logits = seq.prefill(ids);
  const int64_t V = model->vocab_size();
  for (size_t t = 0; t < ids.size(); ++t) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < V; ++i) {
      const float x = logits[t * V + i];
      ASSERT_TRUE(std::isfinite(x)) << "position " << t;
      s += x;
      ss += double(x) * x;
    }
    const double sd = std::sqrt(ss / V - (s / V) * (s / V));
    EXPECT_GT(sd, 0.3) << "position " << t;  // activations neither vanish...
    EXPECT_LT(sd, 3.0) << "position " << t;  // ...nor blow up through 13 layers
  }
}

TEST_F(Init, SameSeedSameBytesOtherSeedOtherBytes) {
  fs::path a = tmp("a"), b = tmp("b"), c = tmp("c");
  for (auto [dir, seed] : {std::pair{a, 5}, {b, 5}, {c, 6}}) {
    ASSERT_EQ(
        k3("init --config " + kConfig + " -o " + dir.string() + " --seed " + std::to_string(seed))
            .status,
        0);
  }
  const std::string shard = "model-00001-of-000001.safetensors";
  EXPECT_EQ(slurp(a / shard), slurp(b / shard));
  EXPECT_NE(slurp(a / shard), slurp(c / shard));
}

TEST_F(Init, ShardsMxfp4AndIndexInTheOfficialLayout) {
  fs::path dir = tmp("shards");
  ASSERT_EQ(
      k3("init --config " + kConfig + " -o " + dir.string() + " --mxfp4 --shard-gb 0.0001").status,
      0);
  std::ifstream f(dir / "model.safetensors.index.json");
  auto idx = nlohmann::json::parse(f);
  std::set<std::string> shards;
  for (auto& [name, file] : idx["weight_map"].items()) shards.insert(file.get<std::string>());
  EXPECT_GT(shards.size(), 2u);
  EXPECT_TRUE(shards.count("model-00001-of-" +
                           std::string(6 - std::to_string(shards.size()).size(), '0') +
                           std::to_string(shards.size()) + ".safetensors"));
  EXPECT_TRUE(idx["weight_map"].contains(
      "language_model.model.layers.1.block_sparse_moe.experts.0.w1.weight_packed"));
  std::ifstream cf(dir / "config.json");
  auto cfg = nlohmann::json::parse(cf);
  EXPECT_EQ(cfg["quantization_config"]["format"], "mxfp4-pack-quantized");
  EXPECT_EQ(cfg["architectures"][0], "KimiK3ForConditionalGeneration");
  EXPECT_NO_THROW(k3::Model::load(dir.string()));
}

TEST_F(Init, BadConfigIsAClearError) {
  fs::path cfg = tmp("bad.json");
  std::ofstream(cfg) << R"({"text_config": {"hidden_size": 8}})";
  Result r = k3("init --config " + cfg.string() + " -o " + tmp("never").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("missing field 'vocab_size'"), std::string::npos) << r.out;
}

TEST(Cli, InspectDescribesTheModel) {
  Result r = k3("inspect -m " K3_SOURCE_DIR "/tests/data/models/c2_13layer");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* s : {"KKKM|KKKM|KKKM|M", "parameters by component", "MXFP4", "MLA latent cache",
                        "KDA state", "expected peak memory"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
}

TEST(Cli, LogitsWritesTheDocumentedNpy) {
  const fs::path out =
      fs::temp_directory_path() / ("k3_cli_logits_" + std::to_string(getpid()) + ".npy");
  Result r = k3("logits -m " K3_SOURCE_DIR "/tests/data/models/c1_tiny --ids 5,6,7 --decode -o " +
                out.string());
  ASSERT_EQ(r.status, 0) << r.out;
  k3::NpyArray a = k3::npy_read_f32(out.string());
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 256}));
  fs::remove(out);
}

TEST(Cli, EveryCommandHasHelpAndUnknownCommandsFail) {
  for (const char* c : {"init", "logits", "inspect"}) {
    Result r = k3(std::string(c) + " --help");
    EXPECT_EQ(r.status, 0) << c;
    EXPECT_NE(r.out.find("usage: k3"), std::string::npos) << c;
  }
  EXPECT_EQ(k3("--help").status, 0);
  EXPECT_EQ(k3("frobnicate").status, 2);
}

}  // namespace
