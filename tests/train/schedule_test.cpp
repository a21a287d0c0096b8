// Learning-rate schedules at known steps, and parameter-group classification of a real config.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <set>

#include "k3/error.h"
#include "k3/hparams.h"
#include "k3/weight_table.h"
#include "train/lr_schedule.h"
#include "train/param_groups.h"

namespace k3::train {
namespace {

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s{LrShape::cosine, 1e-3, 1e-4, 10, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 1e-4);  // peak / warmup
  EXPECT_DOUBLE_EQ(s.at(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);
  EXPECT_NEAR(s.at(60), 5.5e-4, 1e-15);  // half-way: (peak + min) / 2
  EXPECT_NEAR(s.at(35), 1e-4 + 9e-4 * 0.5 * (1 + std::cos(std::numbers::pi / 4)), 1e-15);
  EXPECT_DOUBLE_EQ(s.at(110), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(1000), 1e-4);
}

TEST(LrSchedule, WarmupStableDecay) {
  LrSchedule s{LrShape::wsd, 1e-3, 0.0, 10, 100, 0.2};
  EXPECT_DOUBLE_EQ(s.at(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(50), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(80), 1e-3);  // decay starts at total - 20
  EXPECT_DOUBLE_EQ(s.at(90), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(95), 2.5e-4);
  s.wsd_decay = WsdDecay::one_minus_sqrt;
  EXPECT_NEAR(s.at(90), 1e-3 * (1 - std::sqrt(0.5)), 1e-15);
  EXPECT_DOUBLE_EQ(s.at(100), 0.0);
}

TEST(LrSchedule, ConstantAndValidation) {
  LrSchedule s{LrShape::constant, 2e-3, 0.0, 0, 10};
  EXPECT_DOUBLE_EQ(s.at(0), 2e-3);
  EXPECT_DOUBLE_EQ(s.at(50), 2e-3);
  EXPECT_NO_THROW(s.validate());
  s.warmup = 11;
  EXPECT_THROW(s.validate(), Error);
  s = LrSchedule{LrShape::cosine, 1e-3, 2e-3, 0, 10};
  EXPECT_THROW(s.validate(), Error);  // min above peak
  EXPECT_EQ(parse_lr_shape("wsd"), LrShape::wsd);
  EXPECT_THROW(parse_lr_shape("linear"), Error);
}

TEST(ParamGroups, DefaultConfig) {
  HParams hp = hparams_from_file(K3_SOURCE_DIR "/configs/default.json");
  std::set<Update> seen;
  for (const WeightEntry& w : weight_table(hp)) {
    ParamGroup g = param_group(w, hp, true);
    seen.insert(g.update);
    const std::string& n = w.name;
    auto ends = [&](const std::string& suffix) {
      return n.size() >= suffix.size() &&
             n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends("e_score_correction_bias")) {
      EXPECT_EQ(g.update, Update::frozen) << n;
    } else if (w.shape.size() == 1 || ends("embed_tokens.weight") || ends("lm_head.weight") ||
               ends("gate.weight") || ends("res_proj.weight") ||
               n.find("conv1d") != std::string::npos) {
      EXPECT_EQ(g.update, Update::adamw) << n;
    } else {
      EXPECT_EQ(g.update, Update::muon) << n;
    }
    if (g.update == Update::muon && g.head_axis != HeadAxis::none) {
      const int64_t axis = g.head_axis == HeadAxis::rows ? w.shape[0] : w.shape[1];
      EXPECT_EQ(axis % g.heads, 0) << n;
      EXPECT_TRUE(ends("q_proj.weight") || ends("k_proj.weight") || ends("v_proj.weight") ||
                  ends("f_b_proj.weight") || ends("g_proj.weight") || ends("o_proj.weight") ||
                  ends("q_b_proj.weight") || ends("kv_b_proj.weight"))
          << n;
      EXPECT_EQ(g.head_axis == HeadAxis::cols, ends("o_proj.weight")) << n;
    }
    int long_axes = 0;
    for (int64_t d : w.shape) long_axes += d > 1;
    EXPECT_EQ(g.decay, long_axes >= 2) << n;
    // Without per-head Muon the same tensors are Muon on the whole matrix.
    ParamGroup whole = param_group(w, hp, false);
    EXPECT_EQ(whole.update, g.update) << n;
    EXPECT_EQ(whole.head_axis, HeadAxis::none) << n;
  }
  EXPECT_EQ(seen.size(), 3u);  // the default config has all three kinds
  // By name: the same answer, and a clear error for a name the config lacks.
  const ParamGroup o =
      param_group("language_model.model.layers.3.self_attn.o_proj.weight", hp, true);
  EXPECT_EQ(o.update, Update::muon);
  EXPECT_EQ(o.head_axis, HeadAxis::cols);
  EXPECT_EQ(o.heads, hp.attn_kind[3] == AttnKind::mla ? hp.mla.n_head : hp.kda.n_head);
  EXPECT_EQ(param_group("language_model.model.embed_tokens.weight", hp, true).update,
            Update::adamw);
  EXPECT_THROW(param_group("language_model.model.layers.99.mlp.w1.weight", hp, true), Error);
}

TEST(ParamGroups, Mxfp4ExpertsTrainAsOneMatrix) {
  // An MXFP4 config's table holds .weight_packed and .weight_scale; training names the fp32
  // matrix "<base>.weight", which is a Muon matrix.
  HParams hp = hparams_from_file(K3_PUBLIC_GOLDEN_DIR "/p1_mxfp4_7layer/config.json");
  int experts = 0;
  for (const WeightEntry& w : weight_table(hp)) {
    const std::string suffix = ".weight_packed";
    if (w.name.size() < suffix.size() ||
        w.name.compare(w.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string base = w.name.substr(0, w.name.size() - suffix.size());
    EXPECT_EQ(param_group(base + ".weight", hp, true).update, Update::muon) << base;
    ++experts;
  }
  EXPECT_GT(experts, 0);
}

}  // namespace
}  // namespace k3::train
