// Parameter counts: spec §11.1 for the real K3 config, and the public golden checkpoints' own
// safetensors headers for two small variants (an independent count of every stored tensor).
#include "cost/params.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cost/memory.h"
#include "util.h"

namespace k3::cost {
namespace {

TEST(CostParams, KimiK3ComponentsMatchSpec) {
  ParamCounts c = param_counts(test::kimi_k3());
  EXPECT_EQ(c.n_kda, 69);
  EXPECT_EQ(c.n_mla, 24);
  EXPECT_EQ(c.n_dense, 1);
  EXPECT_EQ(c.n_moe, 92);
  EXPECT_EQ(c.kda_layer, 443'740'416);
  EXPECT_EQ(c.mla_layer, 232'196'096);
  EXPECT_EQ(c.moe.total(), 29'784'936'832);
  EXPECT_EQ(c.dense_ffn, 726'663'168);
  EXPECT_EQ(c.embed + c.lm_head, 2'348'810'240);
  EXPECT_EQ(c.layer_glue, 6 * 7168);
  EXPECT_EQ(c.model_glue, 3 * 7168);
  EXPECT_EQ(c.total(), 2'779'484'478'208);
}

TEST(CostParams, KimiK3ActivePerToken) {
  ParamCounts c = param_counts(test::kimi_k3());
  EXPECT_EQ(c.moe.routed_active(), 528'482'304);
  EXPECT_EQ(c.active(), 105'364'019'968);                // ≈ 105.4 B with the embedding table
  EXPECT_EQ(c.active_without_embed(), 104'189'614'848);  // ≈ 104.2 B without
  EXPECT_NEAR(static_cast<double>(c.active()) / 1e9, 105.4, 0.05);
  EXPECT_NEAR(static_cast<double>(c.active_without_embed()) / 1e9, 104.2, 0.05);
}

TEST(CostParams, KimiK3LatentMoeBudget) {
  LatentBudget b = latent_budget(test::kimi_k3());
  EXPECT_EQ(b.alpha, 2.0);
  EXPECT_EQ(b.full_n_expert, 448);
  EXPECT_EQ(b.full_n_used, 8);
  EXPECT_EQ(b.latent_active, 528'482'304);  // 16 x 3 x 3584 x 3072
  EXPECT_EQ(b.full_active, 8.0 * 3 * 7168 * 3072);
  EXPECT_EQ(b.full_active, b.latent_active);  // equal routed matrices
  EXPECT_EQ(b.full_total, b.latent_total);
  EXPECT_EQ(b.projections, 51'380'224);
  EXPECT_NEAR(b.projection_fraction, 0.0972, 5e-5);  // "9.7% extra per layer"
  EXPECT_EQ(b.shared, 132'120'576);
  EXPECT_EQ(b.sparsity, 56);
}

// Sums the logical parameters and the stored bytes of every tensor in a golden checkpoint.
// An MXFP4 weight_packed [O, I/2] holds O*I weights; weight_scale holds bytes but no weights.
void checkpoint_totals(const std::string& dir, int64_t* params, int64_t* bytes) {
  nlohmann::json index;
  std::ifstream(dir + "/model.safetensors.index.json") >> index;
  std::set<std::string> shards;
  for (auto& [name, shard] : index["weight_map"].items()) shards.insert(shard.get<std::string>());
  *params = *bytes = 0;
  for (const std::string& shard : shards) {
    std::ifstream f(dir + "/" + shard, std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string header(n, '\0');
    f.read(header.data(), static_cast<std::streamsize>(n));
    nlohmann::json tensors = nlohmann::json::parse(header);
    for (auto& [name, t] : tensors.items()) {
      if (name == "__metadata__") continue;
      int64_t count = 1;
      for (int64_t d : t["shape"]) count *= d;
      if (name.ends_with("weight_packed")) count *= 2;
      if (name.ends_with("weight_scale")) count = 0;
      *params += count;
      *bytes += t["data_offsets"][1].get<int64_t>() - t["data_offsets"][0].get<int64_t>();
    }
  }
}

class GoldenCheckpoint : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenCheckpoint, CountsMatchSafetensorsHeaders) {
  std::string dir = std::string(K3_PUBLIC_GOLDEN_DIR) + "/" + GetParam();
  HParams hp = hparams_from_file(dir + "/config.json");
  int64_t params = 0, bytes = 0;
  checkpoint_totals(dir, &params, &bytes);
  EXPECT_EQ(param_counts(hp).total(), params);
  EXPECT_EQ(weight_bytes(hp).total(), static_cast<double>(bytes));
}

INSTANTIATE_TEST_SUITE_P(Cost, GoldenCheckpoint,
                         ::testing::Values("p1_mxfp4_7layer", "p2_bf16_dense2"));

TEST(CostParams, KimiK3StoredBytes) {
  WeightBytes w = weight_bytes(test::kimi_k3());
  // 82,432 experts x 17,547,264 B (spec §9.2); the text model is ~1.560 TB of the 1.5609 TB release
  // (the rest is the vision tower).
  EXPECT_EQ(w.experts, 82'432.0 * 17'547'264);
  EXPECT_NEAR(w.total() / 1e12, 1.560, 0.001);
}

}  // namespace
}  // namespace k3::cost
