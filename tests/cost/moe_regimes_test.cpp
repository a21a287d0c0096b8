// MoE serving regimes for the eff/acc LatentMoE variants ([A1] "Stable LatentMoE") and the
// hardware presets / --hw FILE parsing.
#include "cost/moe_regimes.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "cost/hardware.h"
#include "util.h"

namespace k3::cost {
namespace {

Hardware simple_hw() {
  Hardware hw;
  hw.name = "test";
  hw.flop_per_s = 1000e12;
  hw.hbm_bytes_per_s = 4e12;
  hw.net_bytes_per_s = 50e9;
  hw.ep_size = 64;
  hw.act_bytes = 2;
  return hw;
}

TEST(CostMoe, KimiK3FullEffAcc) {
  std::vector<MoeRegime> r = moe_regimes(test::kimi_k3(), simple_hw());
  ASSERT_EQ(r.size(), 3u);
  const MoeRegime &full = r[0], &eff = r[1], &acc = r[2];
  EXPECT_EQ(full.name, "full");
  EXPECT_EQ(full.width, 7168);
  EXPECT_EQ(full.n_expert, 448);
  EXPECT_EQ(full.n_used, 8);
  EXPECT_EQ(eff.width, 3584);
  EXPECT_EQ(eff.n_expert, 896);
  EXPECT_EQ(eff.n_used, 8);
  EXPECT_EQ(acc.n_expert, 896);
  EXPECT_EQ(acc.n_used, 16);
  // N' l m = N d m: all three hold the same routed parameters.
  EXPECT_EQ(full.total_params, 29'595'009'024);
  EXPECT_EQ(eff.total_params, full.total_params);
  EXPECT_EQ(acc.total_params, full.total_params);
  // acc keeps the active cost and the all-to-all volume; eff divides both by alpha = 2.
  EXPECT_EQ(acc.active_params, 528'482'304);
  EXPECT_EQ(acc.active_params, full.active_params);
  EXPECT_EQ(eff.active_params * 2, full.active_params);
  EXPECT_EQ(acc.net_bytes, full.net_bytes);
  EXPECT_EQ(acc.net_bytes, 2.0 * 16 * 3584 * 2);  // 8 x 7168 = 16 x 3584, dispatch + combine
  EXPECT_EQ(eff.net_bytes * 2, full.net_bytes);
  EXPECT_EQ(acc.flops, 2 * acc.active_params);
  EXPECT_EQ(acc.hbm_bytes, acc.active_params * 17.0 / 32);  // MXFP4 experts
}

TEST(CostMoe, RooflineQuantities) {
  Hardware hw = simple_hw();
  std::vector<MoeRegime> r = moe_regimes(test::kimi_k3(), hw);
  const double wb = 17.0 / 32, m = 3072;
  for (const MoeRegime& x : r) {
    EXPECT_DOUBLE_EQ(x.intensity_one, 2 / wb);
    EXPECT_DOUBLE_EQ(x.tokens_per_expert, hw.flop_per_s / hw.hbm_bytes_per_s * wb / 2);
    EXPECT_DOUBLE_EQ(x.tokens_in_domain, x.tokens_per_expert * x.n_expert / x.n_used);
    EXPECT_DOUBLE_EQ(x.tokens_per_device, x.tokens_in_domain / 64);
    // Once compute-bound, T_comm / T_compute = F a / (3 m B_net): t, K, d, N, E cancel.
    EXPECT_NEAR(x.comm_compute_ratio, hw.flop_per_s * 2 / (3 * m * hw.net_bytes_per_s), 1e-12);
  }
  // eff needs twice the tokens in the EP domain to keep each expert compute-bound.
  EXPECT_DOUBLE_EQ(r[1].tokens_in_domain, 2 * r[2].tokens_in_domain);
}

TEST(CostMoe, NoExpertsNoRegimes) {
  HParams hp = test::kimi_k3();
  hp.moe.n_expert = 0;
  EXPECT_TRUE(moe_regimes(hp, simple_hw()).empty());
}

TEST(CostHardware, PresetsParse) {
  std::vector<std::string> names = hardware_preset_names();
  for (const char* want : {"h200", "h100", "mi300x", "cpu-laptop"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const std::string& n : names) {
    Hardware hw = hardware_preset(n);
    EXPECT_EQ(hw.name, n);
    EXPECT_GT(hw.flop_per_s, 0);
    EXPECT_GT(hw.hbm_bytes_per_s, 0);
    EXPECT_GT(hw.net_bytes_per_s, 0);
    EXPECT_GE(hw.ep_size, 1);
  }
  Hardware h200 = hardware_resolve("h200");
  EXPECT_EQ(h200.hbm_bytes_per_s, 4.8e12);
  EXPECT_EQ(h200.ep_size, 64);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CostHardware, UnknownPresetNamesTheKnownOnes) {
  std::string e = error_of([] { hardware_resolve("tpu-v9"); });
  EXPECT_NE(e.find("unknown hardware preset 'tpu-v9'"), std::string::npos) << e;
  EXPECT_NE(e.find("h200"), std::string::npos) << e;
}

TEST(CostHardware, BadFields) {
  using nlohmann::json;
  json ok = {
      {"flop_per_s", 1e15}, {"hbm_bytes_per_s", 3e12}, {"net_bytes_per_s", 4e10}, {"ep_size", 8}};
  Hardware hw = hardware_from_json(ok, "hw.json");
  EXPECT_EQ(hw.name, "hw.json");
  EXPECT_EQ(hw.act_bytes, 2);
  auto with = [&](const char* key, json v) {
    json j = ok;
    j[key] = v;
    return error_of([&] { hardware_from_json(j, "hw.json"); });
  };
  EXPECT_NE(with("flop_per_s", -1).find("hw.json.flop_per_s: expected a positive number"),
            std::string::npos);
  EXPECT_NE(with("ep_size", 2.5).find("hw.json.ep_size: expected a positive integer"),
            std::string::npos);
  EXPECT_NE(with("net_bytes_per_s", "fast").find("net_bytes_per_s"), std::string::npos);
  EXPECT_NE(with("hbm_bw", 1).find("unknown field 'hbm_bw'"), std::string::npos);
  json missing = ok;
  missing.erase("hbm_bytes_per_s");
  EXPECT_NE(error_of([&] {
              hardware_from_json(missing, "hw.json");
            }).find("hw.json: missing field 'hbm_bytes_per_s'"),
            std::string::npos);
  EXPECT_NE(error_of([] { hardware_from_json(json::array(), "hw.json"); }).find("JSON object"),
            std::string::npos);
}

TEST(CostHardware, Files) {
  std::string path = test::temp_path("k3_cost_hw.json");
  std::ofstream(path) << R"({"name": "mine", "flop_per_s": 2e15, "hbm_bytes_per_s": 8e12,
                             "net_bytes_per_s": 1e11, "ep_size": 32, "act_bytes": 1})";
  Hardware hw = hardware_resolve(path);
  EXPECT_EQ(hw.name, "mine");
  EXPECT_EQ(hw.ep_size, 32);
  EXPECT_EQ(hw.act_bytes, 1);
  std::ofstream(path) << "{not json";
  EXPECT_NE(error_of([&] { hardware_resolve(path); }).find("not valid JSON"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_NE(
      error_of([] { hardware_resolve("/nonexistent/hw.json"); }).find("cannot open hardware file"),
      std::string::npos);
}

}  // namespace
}  // namespace k3::cost
