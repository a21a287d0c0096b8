// The cross-entropy loss forward (fp32 with double sums) against its reference. (Its gradient
// cases are in test_grad_core.cpp.)
#include <string>

#include "ops/harness.h"
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
