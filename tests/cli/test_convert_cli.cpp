// `k3 convert` as users run it: BF16 and MXFP4 outputs that load, are exact where the source
// already lies on the target grid, and clear errors for bad arguments.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "k3/k3.h"
#include "loader/checkpoint.h"
#include "train/params.h"

namespace {
namespace fs = std::filesystem;

struct Result {
  int status;
  std::string out;
};

Result k3(const std::string& args) {
  const fs::path log =
      fs::temp_directory_path() / ("k3_convert_test_out_" + std::to_string(getpid()) + ".txt");
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

const std::string kShard = "model-00001-of-000001.safetensors";

class Convert : public ::testing::Test {
 protected:
  fs::path tmp(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("k3_convert_test_" + name);
    fs::remove_all(p);
    made_.push_back(p);
    return p;
  }
  // A random checkpoint of the 13-layer test config (BF16 experts unless `mxfp4`).
  fs::path init(const std::string& name, bool mxfp4) {
    std::ifstream f(K3_SOURCE_DIR "/tests/data/models/c2_13layer/config.json");
    nlohmann::json config = nlohmann::json::parse(f);
    config.erase("quantization_config");
    const fs::path cfg = tmp(name + ".json");
    std::ofstream(cfg) << config.dump();
    fs::path dir = tmp(name);
    const Result r = k3("init --config " + cfg.string() + " -o " + dir.string() + " --seed 7" +
                        (mxfp4 ? " --mxfp4" : ""));
    EXPECT_EQ(r.status, 0) << r.out;
    return dir;
  }
  void TearDown() override {
    for (auto& p : made_) fs::remove_all(p);
  }
  std::vector<fs::path> made_;
};

std::vector<float> prefill_logits(const fs::path& dir) {
  auto model = k3::Model::load(dir.string());
  k3::Sequence seq(*model);
  std::vector<int64_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 53 + 11) % model->vocab_size());
  return seq.prefill(ids);
}

TEST_F(Convert, Bf16ToBf16IsByteIdentical) {
  const fs::path src = init("bf16_src", false), out = tmp("bf16_out");
  const Result r = k3("convert -m " + src.string() + " -o " + out.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("wrote"), std::string::npos) << r.out;
  EXPECT_TRUE(slurp(src / kShard) == slurp(out / kShard));
}

TEST_F(Convert, Mxfp4ToMxfp4KeepsTheGridExactly) {
  // Values already on an MXFP4 grid re-encode to the same values (scales may be chosen
  // tighter by the OCP rule, which keeps every grid value representable).
  const fs::path src = init("mx_src", true), out = tmp("mx_out");
  ASSERT_EQ(k3("convert --mxfp4 -m " + src.string() + " -o " + out.string()).status, 0);
  const std::vector<float> a = prefill_logits(src), b = prefill_logits(out);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
}

TEST_F(Convert, Bf16ToMxfp4ChangesOnlyRoutedExpertsByTheGridError) {
  const fs::path src = init("q_src", false), out = tmp("q_out");
  ASSERT_EQ(k3("convert --mxfp4 -m " + src.string() + " -o " + out.string()).status, 0);
  EXPECT_LT(fs::file_size(out / kShard), fs::file_size(src / kShard));
  const k3::ParamSet a = k3::ParamSet::from_checkpoint(k3::Checkpoint(src.string()));
  const k3::ParamSet b = k3::ParamSet::from_checkpoint(k3::Checkpoint(out.string()));
  ASSERT_EQ(a.all().size(), b.all().size());
  int experts = 0;
  for (const auto& [name, p] : a.all()) {
    const std::vector<float>& q = b.all().at(name).value;
    ASSERT_EQ(p.value.size(), q.size()) << name;
    const bool routed = name.find(".experts.") != std::string::npos;
    double num = 0, den = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      num += (double(q[i]) - p.value[i]) * (double(q[i]) - p.value[i]);
      den += double(p.value[i]) * p.value[i];
    }
    if (!routed) {
      EXPECT_EQ(num, 0.0) << name << " is not a routed expert and must be unchanged";
      continue;
    }
    ++experts;
    const double rel = std::sqrt(num / den);
    EXPECT_GT(rel, 0.0) << name;   // really quantized
    EXPECT_LT(rel, 0.15) << name;  // E2M1 with a per-32 scale: ~0.1 on Gaussian rows
  }
  EXPECT_GT(experts, 0);
}

TEST_F(Convert, BadArgumentsExitOneWithAMessage) {
  const fs::path src = init("err_src", false), out = tmp("err_out");
  Result r = k3("convert -o " + out.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("-m DIR"), std::string::npos) << r.out;
  r = k3("convert -m " + src.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("-o DIR"), std::string::npos) << r.out;
  r = k3("convert -m /nonexistent/k3-model -o " + out.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("/nonexistent/k3-model"), std::string::npos) << r.out;
  r = k3("convert -m " + src.string() + " -o " + src.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("differ"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
