// One AdamW and one Muon step against hand-computed values; per-head Muon, clipping,
// accumulation and frozen parameters.
#include "train/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "k3/error.h"
#include "k3/hparams.h"
#include "k3/model.h"
#include "k3/weight_table.h"
#include "train/newton_schulz.h"

namespace k3::train {
namespace {

Param make(std::vector<float>& w, std::vector<float>& g, std::vector<int64_t> shape, Update u,
           bool decay = true) {
  return Param{"p", std::move(shape), w.data(), g.data(), ParamGroup{u, HeadAxis::none, 1, decay}};
}

TEST(Optimizer, AdamWTwoStepsByHand) {
  // b1 0.9, b2 0.99, lr 0.1, wd 0.01. Element 0, gradients 0.5 then -0.25:
  //   step 1: m = 0.05, v = 0.0025, m^ = 0.5, v^ = 0.25, w = 1 * 0.999 - 0.1 * 0.5 / 0.5 = 0.899
  //   step 2: m = 0.02, v = 0.0031, m^ = 0.02 / 0.19, v^ = 0.0031 / 0.0199,
  //           w = 0.899 * 0.999 - 0.1 * 0.1052632 / 0.3946883 = 0.8714311
  // Element 1 (w = -2, gradient 0 then 0) stays at -2 * 0.999^2 (decay only).
  std::vector<float> w = {1.0f, -2.0f}, g = {0.5f, 0.0f};
  OptimizerConfig cfg;
  cfg.adam_beta1 = 0.9f;
  cfg.adam_beta2 = 0.99f;
  cfg.weight_decay = 0.01f;
  Optimizer opt({make(w, g, {2}, Update::adamw)}, cfg);
  opt.step(0.1f);
  EXPECT_NEAR(w[0], 0.899, 1e-6);
  g = {-0.25f, 0.0f};
  opt.step(0.1f);
  EXPECT_NEAR(w[0], 0.8714311, 1e-6);
  EXPECT_NEAR(w[1], -2.0 * 0.999 * 0.999, 1e-6);
  EXPECT_EQ(opt.steps_taken(), 2);
}

TEST(Optimizer, AdamWWithoutDecay) {
  std::vector<float> w = {3.0f}, g = {0.0f};
  Optimizer opt({make(w, g, {1}, Update::adamw, false)}, OptimizerConfig{});
  opt.step(0.5f);
  EXPECT_EQ(w[0], 3.0f);  // no gradient, no decay: unchanged
}

TEST(Optimizer, MuonOneStepByHand) {
  // G = 3 u1 v1ᵀ + 4 u2 v2ᵀ with u = a rotation by 0.3, v1 = (1,2,2)/3, v2 = (2,1,-2)/3, so
  // |G|_F = 5 and NS(G) = p(0.6) u1 v1ᵀ + p(0.8) u2 v2ᵀ (p: 5 quintic steps). The first
  // Nesterov step orthogonalises (1 + mu) G, the same direction. With W = 1 everywhere,
  // lr 0.02, wd 0.1: W' = 1 * (1 - 0.002) - 0.02 * 0.2 * sqrt(3) * NS(G).
  const double c = std::cos(0.3), s = std::sin(0.3);
  const double u1[2] = {c, s}, u2[2] = {-s, c};
  const double v1[3] = {1 / 3.0, 2 / 3.0, 2 / 3.0}, v2[3] = {2 / 3.0, 1 / 3.0, -2 / 3.0};
  std::vector<float> g(6), w(6, 1.0f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) g[i * 3 + j] = float(3 * u1[i] * v1[j] + 4 * u2[i] * v2[j]);
  OptimizerConfig cfg;
  cfg.weight_decay = 0.1f;
  Optimizer opt({make(w, g, {2, 3}, Update::muon)}, cfg);
  opt.step(0.02f);
  const double p6 = newton_schulz_scalar(0.6), p8 = newton_schulz_scalar(0.8);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      const double o = p6 * u1[i] * v1[j] + p8 * u2[i] * v2[j];
      EXPECT_NEAR(w[i * 3 + j], 0.998 - 0.02 * 0.2 * std::sqrt(3.0) * o, 2e-6) << i << j;
    }
  }
}

TEST(Optimizer, MuonMomentumAndPerHeadBlocks) {
  // [4, 3] split into two head blocks of rows: each 2 x 3 block is orthogonalised on its own
  // (scale sqrt(3) each). Two steps with mu = 0.5, no Nesterov: u2 = 0.5 g1 + g2.
  std::vector<float> g1 = {1, 2, 0, -1, 0, 3, 2, 2, 1, 0, -1, 1};
  std::vector<float> g2 = {0, 1, 1, 2, -2, 0, 1, 0, 0, 1, 1, -3};
  std::vector<float> w(12, 0.0f), g = g1;
  OptimizerConfig cfg;
  cfg.weight_decay = 0;
  cfg.muon_momentum = 0.5f;
  cfg.muon_nesterov = false;
  Param p{"p", {4, 3}, w.data(), g.data(), ParamGroup{Update::muon, HeadAxis::rows, 2, true}};
  Optimizer opt({p}, cfg);
  opt.step(1.0f);
  g = g2;
  opt.step(1.0f);
  std::vector<float> u1 = g1, u2(12), want(12, 0.0f);
  for (size_t i = 0; i < 12; ++i) u2[i] = 0.5f * g1[i] + g2[i];
  for (const std::vector<float>* u : {&u1, &u2}) {
    for (int h = 0; h < 2; ++h) {
      float o[6];
      newton_schulz(u->data() + h * 6, o, 2, 3);
      for (int i = 0; i < 6; ++i) want[h * 6 + i] -= 0.2f * std::sqrt(3.0f) * o[i];
    }
  }
  for (size_t i = 0; i < 12; ++i) EXPECT_NEAR(w[i], want[i], 1e-6) << i;

  // Column heads: [3, 4] in two 3 x 2 blocks of columns.
  std::vector<float> wc(12, 0.0f), gc = g1;
  Param pc{"pc", {3, 4}, wc.data(), gc.data(), ParamGroup{Update::muon, HeadAxis::cols, 2, true}};
  Optimizer optc({pc}, cfg);
  optc.step(1.0f);
  for (int h = 0; h < 2; ++h) {
    float blk[6], o[6];
    for (int r = 0; r < 3; ++r)
      for (int cc = 0; cc < 2; ++cc) blk[r * 2 + cc] = g1[r * 4 + h * 2 + cc];
    newton_schulz(blk, o, 3, 2);
    for (int r = 0; r < 3; ++r)
      for (int cc = 0; cc < 2; ++cc)
        EXPECT_NEAR(wc[r * 4 + h * 2 + cc], -0.2f * std::sqrt(3.0f) * o[r * 2 + cc], 1e-6);
  }
}

// The orthogonaliser sees every head block of every Muon matrix once per step, with the
// block's shape, and the update uses what it writes: here the host's own, counted, gives the
// default's bits; one that writes zeros leaves only the weight decay.
TEST(Optimizer, OrthogonalizerGetsEveryBlockAndItsOutputIsUsed) {
  std::vector<float> g1 = {1, 2, 0, -1, 0, 3, 2, 2, 1, 0, -1, 1}, g2 = {3, -1, 2, 0, 1, 1};
  auto make_params = [&](std::vector<float>& w1, std::vector<float>& w2, std::vector<float>& a,
                         std::vector<float>& b) {
    w1.assign(12, 0.5f), w2.assign(6, -0.25f), a = g1, b = g2;
    return std::vector<Param>{Param{"heads",
                                    {4, 3},
                                    w1.data(),
                                    a.data(),
                                    ParamGroup{Update::muon, HeadAxis::rows, 2, true}},
                              Param{"plain",
                                    {3, 2},
                                    w2.data(),
                                    b.data(),
                                    ParamGroup{Update::muon, HeadAxis::none, 1, true}}};
  };
  std::vector<float> w1, w2, a, b, x1, x2, c, d;
  Optimizer plain(make_params(w1, w2, a, b), OptimizerConfig{});
  plain.step(0.1f);
  Optimizer hooked(make_params(x1, x2, c, d), OptimizerConfig{});
  std::vector<std::pair<int64_t, int64_t>> shapes;
  hooked.set_orthogonalizer([&](std::span<const NsBlock> blocks, int steps, NsCoefficients coef) {
    for (const NsBlock& blk : blocks) shapes.emplace_back(blk.rows, blk.cols);
    orthogonalize_on_host(blocks, steps, coef);
  });
  hooked.step(0.1f);
  const std::vector<std::pair<int64_t, int64_t>> want = {{2, 3}, {2, 3}, {3, 2}};
  EXPECT_EQ(shapes, want);
  EXPECT_EQ(x1, w1);
  EXPECT_EQ(x2, w2);

  Optimizer zero(make_params(x1, x2, c, d), OptimizerConfig{});
  zero.set_orthogonalizer([](std::span<const NsBlock> blocks, int, NsCoefficients) {
    for (const NsBlock& blk : blocks) std::fill(blk.out, blk.out + blk.rows * blk.cols, 0.0f);
  });
  zero.step(0.1f);
  const float decayed = 1.0f - 0.1f * OptimizerConfig{}.weight_decay;
  for (float v : x1) EXPECT_EQ(v, 0.5f * decayed);
  for (float v : x2) EXPECT_EQ(v, -0.25f * decayed);
}

TEST(Optimizer, RejectsHeadsThatDoNotDivide) {
  std::vector<float> w(12), g(12);
  Param p{"bad", {4, 3}, w.data(), g.data(), ParamGroup{Update::muon, HeadAxis::rows, 3, true}};
  EXPECT_THROW(Optimizer({p}, OptimizerConfig{}), Error);
  Param v{"vec", {12}, w.data(), g.data(), ParamGroup{Update::muon, HeadAxis::none, 1, true}};
  EXPECT_THROW(Optimizer({v}, OptimizerConfig{}), Error);
}

// The gradient passes split tensors into fixed pieces over the threads: tensors of ragged sizes
// around the piece size (2^16), random gradients, a frozen one. The fused scale + clip equals
// the two passes bit for bit, and neither depends on the thread count; the norm matches a
// plain double sum to rounding.
TEST(Optimizer, GradientPassesAreThreadCountIndependent) {
  const std::vector<int64_t> sizes = {1, 65535, 65536, 65537, 200000, 7};
  const int saved_threads = num_threads();
  auto run = [&](int threads, bool fused, double* norm) {
    set_num_threads(threads);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<std::vector<float>> w(sizes.size()), g(sizes.size());
    std::vector<Param> ps;
    for (size_t i = 0; i < sizes.size(); ++i) {
      w[i].assign(static_cast<size_t>(sizes[i]), 0.0f);
      g[i].resize(static_cast<size_t>(sizes[i]));
      for (float& x : g[i]) x = u(rng);
      ps.push_back(make(w[i], g[i], {sizes[i]}, i == 2 ? Update::frozen : Update::adamw));
    }
    if (fused) {
      *norm = scale_grads_and_clip(ps, 0.25f, 10.0);
    } else {
      scale_grads(ps, 0.25f);
      *norm = clip_grad_norm(ps, 10.0);
    }
    std::vector<float> all;
    for (const auto& v : g) all.insert(all.end(), v.begin(), v.end());
    return all;
  };
  double n_ref = 0;
  const std::vector<float> ref = run(1, false, &n_ref);
  // The norm before clipping against a plain double sum of the same scaled gradients (the same
  // generator), which differs only in the order of the additions.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  double plain = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int64_t j = 0; j < sizes[i]; ++j) {
      const float x = u(rng) * 0.25f;
      if (i != 2) plain += double(x) * x;
    }
  }
  EXPECT_GT(n_ref, 10.0);  // so clipping ran
  EXPECT_NEAR(std::sqrt(plain), n_ref, 1e-12 * n_ref);
  for (int threads : {1, 2, 3}) {
    for (bool fused : {false, true}) {
      double n = 0;
      const std::vector<float> got = run(threads, fused, &n);
      EXPECT_EQ(std::memcmp(&n, &n_ref, sizeof n), 0) << threads << " threads, fused " << fused;
      EXPECT_EQ(got, ref) << threads << " threads, fused " << fused;
    }
  }
  set_num_threads(saved_threads);
}

TEST(Optimizer, FrozenIsUntouchedAndOutOfTheNorm) {
  std::vector<float> w = {1, 2}, g = {3, 4}, wf = {5}, gf = {100};
  std::vector<Param> ps = {make(w, g, {2}, Update::adamw), make(wf, gf, {1}, Update::frozen)};
  EXPECT_DOUBLE_EQ(grad_global_norm(ps), 5.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 1.0), 5.0);
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.8f);
  EXPECT_NEAR(clip_grad_norm(ps, 10.0), 1.0, 1e-6);  // under the limit: unchanged
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  Optimizer opt(ps, OptimizerConfig{});
  opt.step(0.1f);
  EXPECT_EQ(wf[0], 5.0f);
}

TEST(Optimizer, ClipRejectsNonFinite) {
  std::vector<float> w = {1}, g = {NAN};
  std::vector<Param> ps = {make(w, g, {1}, Update::adamw)};
  EXPECT_THROW(clip_grad_norm(ps, 1.0), Error);
}

TEST(Optimizer, AccumulatedMicroBatchesEqualTheMeanGradient) {
  // Backward adds each micro-batch's gradient; scaling by 1/n gives the mean, so two
  // half-batches step exactly like one batch with the averaged gradient.
  const std::vector<float> ga = {0.3f, -1.0f, 2.0f, 0.5f}, gb = {0.1f, 0.4f, -2.0f, 1.5f};
  std::vector<float> w1(4, 1.0f), acc(4, 0.0f), w2(4, 1.0f), mean(4);
  std::vector<Param> p1 = {make(w1, acc, {2, 2}, Update::muon)};
  Optimizer o1(p1, OptimizerConfig{});
  zero_grads(p1);
  for (const auto* micro : {&ga, &gb})
    for (size_t i = 0; i < 4; ++i) acc[i] += (*micro)[i];
  scale_grads(p1, 0.5f);
  o1.step(0.01f);
  for (size_t i = 0; i < 4; ++i) mean[i] = (ga[i] + gb[i]) / 2;
  Optimizer o2({make(w2, mean, {2, 2}, Update::muon)}, OptimizerConfig{});
  o2.step(0.01f);
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(w1[i], w2[i]);
}

}  // namespace
}  // namespace k3::train

namespace k3::train {
namespace {

TEST(Optimizer, ResumesBitExactlyFromSavedMoments) {
  // Three steps, then a fresh optimiser given the saved moments and step count continues
  // exactly like the uninterrupted one (what a resumable checkpoint needs).
  std::vector<float> wa = {0.5f, -1, 2, 0.25f, 1, -0.5f}, wb = {1, 2, -3};
  std::vector<float> ga(6), gb(3);
  auto grads = [&](int s) {
    for (size_t i = 0; i < 6; ++i) ga[i] = std::sin(float(i + 1) * float(s + 1));
    for (size_t i = 0; i < 3; ++i) gb[i] = std::cos(float(i + 2) * float(s + 3));
  };
  auto params = [&](std::vector<float>& a, std::vector<float>& b) {
    return std::vector<Param>{
        Param{"m", {2, 3}, a.data(), ga.data(), ParamGroup{Update::muon, HeadAxis::none, 1, true}},
        Param{"v", {3}, b.data(), gb.data(), ParamGroup{Update::adamw, HeadAxis::none, 1, false}}};
  };
  std::vector<float> ra = wa, rb = wb;
  Optimizer full(params(wa, wb), OptimizerConfig{});
  Optimizer first(params(ra, rb), OptimizerConfig{});
  for (int s = 0; s < 3; ++s) {
    grads(s);
    full.step(0.01f);
    first.step(0.01f);
  }
  Optimizer resumed(params(ra, rb), OptimizerConfig{});
  resumed.first_moments() = first.first_moments();
  resumed.second_moments() = first.second_moments();
  resumed.set_steps_taken(first.steps_taken());
  for (int s = 3; s < 6; ++s) {
    grads(s);
    full.step(0.01f);
    resumed.step(0.01f);
  }
  EXPECT_EQ(wa, ra);
  EXPECT_EQ(wb, rb);
}

}  // namespace
}  // namespace k3::train

namespace k3::train {
namespace {

TEST(Optimizer, StepsEveryTensorOfAConfig) {
  // Buffers for every tensor of the default config, groups from their names, one step with
  // per-head Muon: every non-frozen tensor with a gradient moves, the router bias does not.
  HParams hp = hparams_from_file(K3_SOURCE_DIR "/configs/default.json");
  std::vector<std::vector<float>> values, grads;
  std::vector<WeightEntry> table = weight_table(hp);
  for (const WeightEntry& w : table) {
    int64_t n = 1;
    for (int64_t d : w.shape) n *= d;
    values.emplace_back(size_t(n), 0.5f);
    grads.emplace_back(size_t(n));
    for (size_t i = 0; i < grads.back().size(); ++i) grads.back()[i] = std::sin(float(i) + 1);
  }
  std::vector<Param> ps;
  for (size_t i = 0; i < table.size(); ++i)
    ps.push_back(Param{table[i].name, table[i].shape, values[i].data(), grads[i].data(), {}});
  assign_groups(ps, hp, true);
  Optimizer opt(ps, OptimizerConfig{});
  opt.step(1e-3f);
  for (size_t i = 0; i < table.size(); ++i) {
    const bool frozen = opt.params()[i].group.update == Update::frozen;
    EXPECT_EQ(values[i][0] != 0.5f, !frozen) << table[i].name;
  }
  std::vector<Param> bad = {
      Param{"language_model.model.nope.weight", {2}, values[0].data(), grads[0].data(), {}}};
  EXPECT_THROW(assign_groups(bad, hp, true), Error);
}

}  // namespace
}  // namespace k3::train
