// `k3 convert` as users run it: BF16 and MXFP4 outputs that load, are exact where the source
// already lies on the target grid, and clear errors for bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/cli_harness.h"
#include "k3/k3.h"
#include "loader/checkpoint.h"
#include "train/params.h"

namespace {
namespace fs = std::filesystem;

const std::string kShard = "model-00001-of-000001.safetensors";

// Each test's checkpoints live in its own temporary directory.
class Convert : public ::testing::Test {
 protected:
  std::string tmp(const std::string& name) { return dir_.file(name); }
  // A random checkpoint of the 13-layer test config (BF16 experts unless `mxfp4`).
  std::string init(const std::string& name, bool mxfp4) {
    std::ifstream f(K3_SOURCE_DIR "/tests/data/models/c2_13layer/config.json");
    nlohmann::json config = nlohmann::json::parse(f);
    config.erase("quantization_config");
    const std::string cfg = dir_.write(name + ".json", config.dump()), out = tmp(name);
    std::vector<std::string> args = {"init", "--config", cfg, "-o", out, "--seed", "7"};
    if (mxfp4) args.push_back("--mxfp4");
    const k3::test::CliResult r = k3::test::run_k3(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  }
  // `k3 convert ARGS`, with stderr as the output to check.
  k3::test::CliResult convert(std::vector<std::string> args) {
    args.insert(args.begin(), "convert");
    return k3::test::run_k3(args);
  }
  k3::test::TempDir dir_;
};

std::vector<float> prefill_logits(const std::string& dir) {
  auto model = k3::Model::load(dir);
  k3::Sequence seq(*model);
  std::vector<int64_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 53 + 11) % model->vocab_size());
  return seq.prefill(ids);
}

TEST_F(Convert, Bf16ToBf16IsByteIdentical) {
  const std::string src = init("bf16_src", false), out = tmp("bf16_out");
  const k3::test::CliResult r = convert({"-m", src, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote"), std::string::npos) << r.err;
  EXPECT_TRUE(k3::test::read_file_bytes(src + "/" + kShard) ==
              k3::test::read_file_bytes(out + "/" + kShard));
}

TEST_F(Convert, Mxfp4ToMxfp4KeepsTheGridExactly) {
  // Values already on an MXFP4 grid re-encode to the same values (scales may be chosen
  // tighter by the OCP rule, which keeps every grid value representable).
  const std::string src = init("mx_src", true), out = tmp("mx_out");
  ASSERT_EQ(convert({"--mxfp4", "-m", src, "-o", out}).exit_code, 0);
  const std::vector<float> a = prefill_logits(src), b = prefill_logits(out);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
}

TEST_F(Convert, Bf16ToMxfp4ChangesOnlyRoutedExpertsByTheGridError) {
  const std::string src = init("q_src", false), out = tmp("q_out");
  ASSERT_EQ(convert({"--mxfp4", "-m", src, "-o", out}).exit_code, 0);
  EXPECT_LT(fs::file_size(out + "/" + kShard), fs::file_size(src + "/" + kShard));
  const k3::ParamSet a = k3::ParamSet::from_checkpoint(k3::Checkpoint(src));
  const k3::ParamSet b = k3::ParamSet::from_checkpoint(k3::Checkpoint(out));
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
  const std::string src = init("err_src", false), out = tmp("err_out");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-o", out}, "-m DIR"},
      {{"-m", src}, "-o DIR"},
      {{"-m", "/nonexistent/k3-model", "-o", out}, "/nonexistent/k3-model"},
      {{"-m", src, "-o", src}, "differ"},
  };
  for (const auto& [args, message] : cases) {
    const k3::test::CliResult r = convert(args);
    EXPECT_EQ(r.exit_code, 1) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
