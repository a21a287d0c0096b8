// `k3 cost` end to end: JSON numbers for the real config, -m DIR, --plots, --help, and one clear
// error (exit 1) for each kind of bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util.h"

namespace k3::cost {
namespace {

using nlohmann::json;
using test::run_k3;

const char* kFast = "--sections params,memory,macs,moe,situ";

json run_json(const std::string& args) {
  test::CliResult r = run_k3(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return json::parse(r.out);
}

TEST(CostCli, KimiK3Json) {
  json j = run_json(std::string("cost --config configs/kimi-k3.json ") + kFast);
  EXPECT_EQ(j["params"]["total"], 2'779'484'478'208);
  EXPECT_EQ(j["params"]["active"], 105'364'019'968);
  EXPECT_EQ(j["params"]["active_without_embedding"], 104'189'614'848);
  EXPECT_EQ(j["params"]["kda_layer"], 443'740'416);
  EXPECT_EQ(j["params"]["mla_layer"], 232'196'096);
  EXPECT_EQ(j["params"]["moe_layer"], 29'784'936'832);
  EXPECT_EQ(j["params"]["dense_ffn"], 726'663'168);
  EXPECT_EQ(j["params"]["embed_and_head"], 2'348'810'240);
  EXPECT_EQ(j["latent_moe"]["projections"], 51'380'224);
  EXPECT_EQ(j["latent_moe"]["full_width"]["n_expert"], 448);
  EXPECT_EQ(j["memory"]["kda_state_bytes_per_layer_fp32"], 6'291'456);
  EXPECT_EQ(j["memory"]["kda_total_bytes_fp32"], 464'633'856);
  EXPECT_EQ(j["memory"]["mla_bytes_per_token_fp32"], 55'296);
  EXPECT_EQ(j["memory"]["mla_bytes_per_token_bf16"], 27'648);
  std::vector<long long> cross;
  for (const json& c : j["memory"]["crossover"]) cross.push_back(c["tokens_rounded"]);
  EXPECT_EQ(cross, (std::vector<long long>{2731, 2923, 5461, 5845}));
  EXPECT_EQ(j["macs"]["mla_prefill"], 30'720);
  EXPECT_EQ(j["macs"]["mla_decode"], 104'448);
  EXPECT_EQ(j["macs"]["decode_vs_mha"], 4.25);
  EXPECT_EQ(j["moe"]["hardware"]["name"], "h200");
  EXPECT_EQ(j["moe"]["regimes"].size(), 3u);
  EXPECT_NEAR(j["situ"]["table"][0]["situ_glu"].get<double>(), 92.16686, 5e-6);
  EXPECT_EQ(j["situ"]["table"][0]["swiglu"], 1600.0);
  EXPECT_FALSE(j.contains("qb"));
}

TEST(CostCli, CheckpointDirAndTables) {
  test::CliResult r = run_k3(std::string("cost -m ") + K3_PUBLIC_GOLDEN_DIR +
                             "/p1_mxfp4_7layer --hw mi300x --qb-tokens 256 --qb-steps 5");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* want :
       {"Parameters by component", "LatentMoE budget", "crossover", "Cached scalars", "MoE regimes",
        "SiTU-GLU", "QB simulation", "QB 3x3 enumerable example", "Hardware mi300x"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want;
  }
}

TEST(CostCli, QbJsonAndPlots) {
  std::filesystem::path dir = test::temp_path("k3_cost_plots");
  std::filesystem::remove_all(dir);
  json j = run_json(
      "cost --config configs/kimi-k3.json --sections qb --qb-experts 32 --qb-top-k 4 "
      "--qb-tokens 512 --plots " +
      dir.string());
  EXPECT_EQ(j["qb"]["options"]["seed"], 20260909);
  EXPECT_EQ(j["qb"]["maxvio_exact"].size(), 41u);
  EXPECT_EQ(j["qb"]["toy_3x3"]["optimum"], 4.0);
  EXPECT_NEAR(j["qb"]["toy_3x3"]["kth"]["dual"].back().get<double>(), 5.0, 1e-12);
  for (const char* f : {"capacity.svg", "param_budget.svg", "macs.svg", "cache_scalars.svg",
                        "situ_gates.svg", "situ_diag.svg", "qb_maxvio.svg"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(dir / f)) << f;
  }
  std::filesystem::remove_all(dir);
}

TEST(CostCli, CustomHardwareFile) {
  std::string path = test::temp_path("k3_cost_cli_hw.json");
  std::ofstream(path) << R"({"name": "lab", "flop_per_s": 1e15, "hbm_bytes_per_s": 1e12,
                             "net_bytes_per_s": 1e11, "ep_size": 16})";
  json j = run_json("cost --config configs/kimi-k3.json --sections moe --hw " + path);
  EXPECT_EQ(j["moe"]["hardware"]["name"], "lab");
  EXPECT_NEAR(j["moe"]["regimes"][2]["comm_compute_ratio"].get<double>(),
              1e15 * 2 / (3 * 3072 * 1e11), 1e-9);
  std::remove(path.c_str());
}

TEST(CostCli, DenseConfigSkipsMoeOnlyParts) {
  nlohmann::json cfg;
  std::ifstream(std::string(K3_PUBLIC_GOLDEN_DIR) + "/p2_bf16_dense2/config.json") >> cfg;
  cfg["text_config"]["num_experts"] = 0;
  cfg["text_config"]["first_k_dense_replace"] = 0;
  std::string path = test::temp_path("k3_cost_dense.json");
  std::ofstream(path) << cfg.dump();
  test::CliResult r = run_k3("cost --config " + path);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("QB simulation"), std::string::npos);
  EXPECT_EQ(r.out.find("MoE routed experts"), std::string::npos);
  EXPECT_NE(r.out.find("dense FFN"), std::string::npos);
  r = run_k3("cost --sections qb --config " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("QB simulation needs a MoE config"), std::string::npos) << r.out;
  std::remove(path.c_str());
}

TEST(CostCli, Help) {
  test::CliResult r = run_k3("cost --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* want :
       {"--model", "--config", "--hw", "--json", "--plots", "--sections", "--context", "--batch",
        "--qb-tokens", "--qb-steps", "--qb-bins", "--qb-seed", "--qb-skew", "--lf-rate", "h200",
        "mi300x", "cpu-laptop", "flop_per_s", "docs/cost.md"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want;
  }
}

// Every bad input: exit code 1 and exactly one "error:" line that names the problem.
void expect_error(const std::string& args, const std::string& message) {
  test::CliResult r = run_k3(args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out;
  EXPECT_NE(r.out.find("k3 cost: error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

TEST(CostCli, Errors) {
  expect_error("cost", "give a model: -m DIR");
  expect_error("cost --config /nonexistent/config.json", "cannot open /nonexistent/config.json");
  expect_error("cost -m /nonexistent", "-m /nonexistent: not a directory");
  expect_error("cost -m /tmp --config configs/kimi-k3.json", "not both");
  expect_error("cost --config configs/kimi-k3.json --hw tpu9", "unknown hardware preset 'tpu9'");
  expect_error("cost --config configs/kimi-k3.json --sections params,foo", "unknown section 'foo'");
  expect_error("cost --config configs/kimi-k3.json --batch 0", "--batch");
  expect_error("cost --config configs/kimi-k3.json --bogus", "unknown option '--bogus'");
  std::ofstream(test::temp_path("k3_bad.json")) << "{\"text_config\": ";
  expect_error("cost --config " + test::temp_path("k3_bad.json"), "not valid JSON");
  std::ofstream(test::temp_path("k3_bad_hw.json")) << R"({"flop_per_s": 1e15, "hbm_bytes_per_s": 0,
                                               "net_bytes_per_s": 1e11, "ep_size": 16})";
  expect_error("cost --config configs/kimi-k3.json --hw " + test::temp_path("k3_bad_hw.json"),
               "hbm_bytes_per_s: expected a positive number");
  std::ofstream(test::temp_path("k3_bad_cfg.json")) << R"({"text_config": {"vocab_size": 10}})";
  expect_error("cost --config " + test::temp_path("k3_bad_cfg.json"),
               "missing field 'hidden_size'");
  for (const char* f : {"k3_bad.json", "k3_bad_hw.json", "k3_bad_cfg.json"}) {
    std::remove(test::temp_path(f).c_str());
  }
}

}  // namespace
}  // namespace k3::cost
