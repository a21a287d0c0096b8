// Cache and state memory, and the KDA-vs-MLA crossover: spec §3.6, §4.3, §11.1; [A2] FIG 24.
#include "cost/memory.h"

#include <gtest/gtest.h>

#include <cmath>

#include "util.h"

namespace k3::cost {
namespace {

TEST(CostMemory, KimiK3StateAndCacheSizes) {
  StateSizes s = state_sizes(test::kimi_k3());
  EXPECT_EQ(s.kda_state_scalars, 1'572'864);  // 96 x 128 x 128
  EXPECT_EQ(s.kda_state_bytes(4), 6'291'456);
  EXPECT_EQ(s.kda_conv_scalars, 3 * 12288 * 3);
  EXPECT_EQ(s.kda_layers * s.kda_state_bytes(4), 434'110'464);
  EXPECT_EQ(s.kda_conv_scalars * 4 * s.kda_layers, 30'523'392);
  EXPECT_EQ(s.kda_total_bytes(4), 464'633'856);
  EXPECT_EQ(s.mla_scalars_per_token, 576);
  EXPECT_EQ(s.mla_bytes_per_token(4), 55'296);
  EXPECT_EQ(s.mla_bytes_per_token(2), 27'648);
}

TEST(CostMemory, KimiK3Crossover) {
  const HParams& hp = test::kimi_k3();
  // Unrounded T* = 1,572,864 b / 1152, and the articles' rounding to the nearest token.
  EXPECT_NEAR(kda_mla_crossover(hp, 2, false), 1'572'864.0 * 2 / 1152, 1e-9);
  EXPECT_EQ(std::llround(kda_mla_crossover(hp, 2, false)), 2731);
  EXPECT_EQ(std::llround(kda_mla_crossover(hp, 4, false)), 5461);
  EXPECT_EQ(std::llround(kda_mla_crossover(hp, 2, true)), 2923);
  EXPECT_EQ(std::llround(kda_mla_crossover(hp, 4, true)), 5845);
  // Rounding, not ceiling: 5461.33 -> 5461 (the first length where the hybrid is smaller is 5462).
  EXPECT_EQ(std::ceil(kda_mla_crossover(hp, 4, false)), 5462);
}

TEST(CostMemory, HybridEqualsAllMlaAtTheCrossover) {
  const HParams& hp = test::kimi_k3();
  for (double b : {2.0, 4.0}) {
    double t = kda_mla_crossover(hp, b, false);
    EXPECT_NEAR(hybrid_attention_bytes(hp, t, b) / all_mla_attention_bytes(hp, t), 1.0, 1e-12);
    EXPECT_GT(hybrid_attention_bytes(hp, t / 2, b), all_mla_attention_bytes(hp, t / 2));
    EXPECT_LT(hybrid_attention_bytes(hp, t * 2, b), all_mla_attention_bytes(hp, t * 2));
  }
}

TEST(CostMemory, TotalAtContextAndBatch) {
  const HParams& hp = test::kimi_k3();
  MemoryAt m = memory_at(hp, 131072, 4);
  EXPECT_EQ(m.mla_cache, 27'648.0 * 131072 * 4);
  EXPECT_EQ(m.kda_state, 464'633'856.0 * 4);
  EXPECT_EQ(m.all_mla_cache, 576.0 * 93 * 2 * 131072 * 4);
  EXPECT_EQ(m.total(), m.weights + m.mla_cache + m.kda_state);
  EXPECT_EQ(m.weights, weight_bytes(hp).total());
  EXPECT_THROW(memory_at(hp, 10, 0), Error);
}

TEST(CostMemory, WeightsPerDevice) {
  WeightBytes w = weight_bytes(test::kimi_k3());
  EXPECT_EQ(w.per_device(1), w.total());
  EXPECT_EQ(w.per_device(64), w.other + w.experts / 64);
}

}  // namespace
}  // namespace k3::cost
