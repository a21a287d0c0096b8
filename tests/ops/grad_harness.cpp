// The grad-mode driver (see grad_harness.h) and the registry checks that every op training
// needs has a bwd, and every bwd has gradient cases.
#include "ops/grad_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>

#include "ops/registry.h"
#include "train/training_ops.h"

namespace k3::test {

std::vector<GradCase>& grad_registry() {
  static std::vector<GradCase> cases;
  return cases;
}

RegisterGrad::RegisterGrad(std::vector<GradCase> cases) {
  for (GradCase& c : cases) grad_registry().push_back(std::move(c));
}

namespace {

constexpr size_t kMaxProbes = 160;  // elements probed per input

// A power-of-two step near rel · RMS(v), with v rounded onto a grid of step/64 (zeros nudged
// off it) so that v ± step, v ± 2·step are exact in fp32.
double snap_to_grid(std::vector<float>& v, double rel) {
  double ss = 0;
  for (float x : v) ss += double(x) * x;
  const double rms = std::sqrt(ss / std::max<size_t>(v.size(), 1));
  const double h = std::exp2(std::round(std::log2(rel * std::max(rms, 1e-3))));
  const double grid = h / 64;
  for (float& x : v) {
    x = static_cast<float>(std::round(x / grid) * grid);
    if (x == 0) x = static_cast<float>(grid);
  }
  return h;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

Tensors zeros_like(const Tensors& in) {
  Tensors g;
  for (const auto& v : in) g.emplace_back(v.size(), 0.0f);
  return g;
}

class GradTest : public ::testing::TestWithParam<size_t> {};

TEST_P(GradTest, MatchesFiniteDifferences) {
  const GradCase& c = grad_registry()[GetParam()];
  // Seeded by the case's name, so adding cases does not redraw the others' inputs.
  std::mt19937_64 rng(std::hash<std::string>{}(c.op + " " + c.shape));
  GradProblem p = c.make(rng);
  Tensors in;
  std::vector<double> steps;
  for (GradInput& gi : p.inputs) {
    steps.push_back(snap_to_grid(gi.value, gi.step));
    in.push_back(gi.value);
  }
  const std::vector<float> y0 = p.forward(in);
  ASSERT_FALSE(y0.empty()) << c.op << " " << c.shape;
  std::normal_distribution<double> nd(0, 1);
  std::vector<float> dy(y0.size());
  for (float& v : dy) v = static_cast<float>(nd(rng));

  // bwd from zeros, and again onto random values: it must add.
  Tensors grads = zeros_like(in), pre = zeros_like(in);
  p.backward(in, dy, grads);
  for (auto& v : pre)
    for (float& x : v) x = static_cast<float>(nd(rng));
  Tensors acc = pre;
  p.backward(in, dy, acc);
  for (size_t i = 0; i < in.size(); ++i) {
    for (size_t j = 0; j < in[i].size(); ++j) {
      const double want = double(pre[i][j]) + grads[i][j];
      ASSERT_NEAR(acc[i][j], want, 1e-5 * (1 + std::fabs(want)))
          << c.op << " bwd does not add into " << p.inputs[i].name << "[" << j << "]";
    }
  }

  bool any_nonzero = false;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<size_t> idx(in[i].size());
    std::iota(idx.begin(), idx.end(), 0);
    if (idx.size() > kMaxProbes) {
      std::shuffle(idx.begin(), idx.end(), rng);
      idx.resize(kMaxProbes);
    }
    const double h = steps[i];
    double err = 0, scale = 0;
    for (size_t j : idx) {
      const float x0 = in[i][j];
      double L[4];
      const double offs[4] = {2 * h, h, -h, -2 * h};
      for (int s = 0; s < 4; ++s) {
        in[i][j] = static_cast<float>(x0 + offs[s]);
        L[s] = dot(dy, p.forward(in));
      }
      in[i][j] = x0;
      const double numeric = (-L[0] + 8 * L[1] - 8 * L[2] + L[3]) / (12 * h);
      err = std::max(err, std::fabs(grads[i][j] - numeric));
      scale = std::max(scale, std::fabs(numeric));
    }
    // A gradient that is truly zero (one key, one candidate) must come out (near) zero.
    const double rel = scale > 1e-9 ? err / scale : err;
    any_nonzero = any_nonzero || scale > 1e-9;
    std::printf("[grad] %-18s %-34s d%-8s max rel err %.2e\n", c.op.c_str(), c.shape.c_str(),
                p.inputs[i].name.c_str(), rel);
    EXPECT_LE(rel, c.tol) << c.op << " [" << c.shape << "] d" << p.inputs[i].name;
  }
  EXPECT_TRUE(any_nonzero) << c.op << " [" << c.shape << "]: every numeric gradient is zero";
}

std::string grad_name(const ::testing::TestParamInfo<size_t>& info) {
  const GradCase& c = grad_registry()[info.param];
  std::string s = c.op + "_" + c.shape;
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s + "_" + std::to_string(info.param);
}

std::vector<size_t> grad_indices() {
  std::vector<size_t> v(grad_registry().size());
  std::iota(v.begin(), v.end(), 0);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Grad, GradTest, ::testing::ValuesIn(grad_indices()), grad_name);

size_t grad_cases_of(const std::string& op) {
  return static_cast<size_t>(std::count_if(grad_registry().begin(), grad_registry().end(),
                                           [&](const GradCase& c) { return c.op == op; }));
}

TEST(OpRegistry, EveryTrainingOpHasBwdAndGradCases) {
  for (const char* name : kTrainingOps) {
    const OpInfo* info = find_op(name);
    ASSERT_NE(info, nullptr) << "training op '" << name << "' is not registered";
    EXPECT_TRUE(info->has_bwd) << "training op '" << name << "' has no bwd";
    EXPECT_GT(grad_cases_of(name), 0u) << "training op '" << name << "' has no GradCase";
  }
}

TEST(OpRegistry, EveryBwdHasGradCases) {
  for (const OpInfo& o : registered_ops()) {
    if (o.has_bwd) {
      EXPECT_GT(grad_cases_of(o.name), 0u) << o.name << " has a bwd but no GradCase";
    }
  }
  for (const GradCase& c : grad_registry()) {
    const OpInfo* info = find_op(c.op);
    EXPECT_TRUE(info != nullptr && info->has_bwd) << "GradCase for op without bwd: " << c.op;
  }
}

}  // namespace
}  // namespace k3::test
