// Attention MAC coefficients and cached scalars: spec §4.3, §11.1; [A2] FIG 31-33.
#include "cost/macs.h"

#include <gtest/gtest.h>

#include <map>

#include "util.h"

namespace k3::cost {
namespace {

TEST(CostMacs, KimiK3Coefficients) {
  MacCoefficients m = mac_coefficients(test::kimi_k3());
  EXPECT_EQ(m.mla_prefill, 30'720);   // 96 x (192 + 128)
  EXPECT_EQ(m.mla_decode, 104'448);   // 96 x (576 + 512)
  EXPECT_EQ(m.mha_baseline, 24'576);  // 96 x (128 + 128)
  EXPECT_DOUBLE_EQ(m.decode_vs_mha(), 4.25);
  EXPECT_DOUBLE_EQ(m.prefill_vs_mha(), 1.25);
}

TEST(CostMacs, KimiK3CachedScalars) {
  MacCoefficients m = mac_coefficients(test::kimi_k3());
  std::map<std::string, AttnVariant> v;
  for (const AttnVariant& x : m.variants) v[x.name] = x;
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v["MHA 128/128"].cached, 24'576);
  EXPECT_EQ(v["GQA8"].cached, 2'048);
  EXPECT_EQ(v["MQA 256/256"].cached, 512);
  EXPECT_EQ(v["MLA"].cached, 576);
  EXPECT_EQ(v["shared K=V"].cached, 512);
  EXPECT_EQ(v["MLA"].mac, 104'448);
  EXPECT_EQ(v["MHA 128/128"].mac, 24'576);
  EXPECT_EQ(v["GQA8"].mac, 24'576);
  EXPECT_EQ(v["MQA 256/256"].mac, 96 * 512);
  EXPECT_EQ(v["shared K=V"].mac, 96 * 1024);
  EXPECT_NEAR(v["MLA"].mac_per_cached_byte(2), 104'448.0 / 1152, 1e-12);
}

TEST(CostMacs, GqaFallsBackToOneGroupForOddHeadCounts) {
  HParams hp = test::kimi_k3();
  hp.mla.n_head = 6;
  MacCoefficients m = mac_coefficients(hp);
  EXPECT_EQ(m.variants[1].name, "GQA1");
  EXPECT_EQ(m.variants[1].cached, 256);
}

}  // namespace
}  // namespace k3::cost
