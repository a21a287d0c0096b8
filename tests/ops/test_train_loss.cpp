// The cross-entropy loss forward (fp32 with double sums) against its reference. (Its gradient
// cases are in test_grad_core.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "ops/harness.h"
#include "ops/linear/linear.h"
#include "ops/loss/cross_entropy.h"

namespace k3::test {
namespace {

// The cross-entropy forward (fp32 with double sums) against its reference.
OpCase cross_entropy_case(int64_t T, int64_t V) {
  return {"cross_entropy", "T=" + std::to_string(T) + " V=" + std::to_string(V), 1e-6,
          [=](std::mt19937_64& rng, Impl impl) {
            std::uniform_int_distribution<int64_t> pick(0, V - 1);
            std::vector<int64_t> targets(T);
            for (int64_t& t : targets) t = pick(rng);
            std::vector<float> logits = randn(rng, T * V, 4.0), got(T), want(T);
            kCrossEntropyOp.get(impl)(logits.data(), targets.data(), T, V, got.data());
            kCrossEntropyOp.ref(logits.data(), targets.data(), T, V, want.data());
            return Outputs{got, widen(want)};
          }};
}

Register forward_cases({cross_entropy_case(1, 1), cross_entropy_case(5, 37),
                        cross_entropy_case(64, 1000)});

}  // namespace
}  // namespace k3::test

namespace k3::test {
namespace {

// Bad input to the training launchers is a clear error, never a crash.
TEST(TrainOps, RejectsWhatTheyCannotDifferentiate) {
  const std::vector<uint16_t> w_bf16(6, 0x3f80);
  const Mat w{2, 3, MatFormat::bf16, w_bf16.data(), nullptr};
  std::vector<float> x(3, 1.0f), dy(2, 1.0f), dx(3), dW(6);
  EXPECT_THROW(kLinearOp.bwd(x.data(), 1, w, dy.data(), dx.data(), dW.data()), Error);
  const std::vector<int64_t> bad_target = {5};
  std::vector<float> logits(4, 0.5f), loss(1), dl(1, 1.0f), dlogits(4);
  EXPECT_THROW(kCrossEntropyOp.cpu(logits.data(), bad_target.data(), 1, 4, loss.data()), Error);
  EXPECT_THROW(kCrossEntropyOp.ref(logits.data(), bad_target.data(), 1, 4, loss.data()), Error);
  EXPECT_THROW(
      kCrossEntropyOp.bwd(logits.data(), bad_target.data(), 1, 4, dl.data(), dlogits.data()),
      Error);
}

// −log softmax on a row of equal logits is log V; its gradient is 1/V − onehot.
TEST(TrainOps, CrossEntropyClosedForm) {
  const int64_t V = 8;
  const std::vector<int64_t> target = {3};
  std::vector<float> logits(V, 1.25f), loss(1), dl(1, 1.0f), d(V, 0.0f);
  kCrossEntropyOp.cpu(logits.data(), target.data(), 1, V, loss.data());
  EXPECT_NEAR(loss[0], std::log(double(V)), 1e-6);
  kCrossEntropyOp.bwd(logits.data(), target.data(), 1, V, dl.data(), d.data());
  for (int64_t v = 0; v < V; ++v) EXPECT_NEAR(d[v], 1.0 / V - (v == 3 ? 1.0 : 0.0), 1e-7);
}

}  // namespace
}  // namespace k3::test
