// The CUDA routed experts the model's way (resident weights, device activations; the op
// harness stages every pointer instead): the device table of expert pointers that
// moe_experts_cuda caches per experts array follows the array when its entries change in
// place, and when a weight range is released and made resident again at another address.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda.h"
#include "ops/moe/moe_experts.h"

namespace k3 {
namespace {

constexpr int64_t kT = 3, kK = 2, kE = 4, kL = 128, kI = 64;

struct Experts {
  std::vector<std::vector<uint8_t>> bytes;  // data, then scales, per matrix
  std::vector<ExpertMats> mats;
};

Experts random_experts(std::mt19937_64& rng) {
  Experts x;
  x.bytes.reserve(6 * kE);  // the Mats point into it
  auto mat = [&](int64_t rows, int64_t cols) {
    x.bytes.emplace_back(static_cast<size_t>(rows * cols / 2));
    for (auto& b : x.bytes.back()) b = static_cast<uint8_t>(rng());
    const uint8_t* data = x.bytes.back().data();
    x.bytes.emplace_back(static_cast<size_t>(rows * cols / 32));
    for (auto& b : x.bytes.back()) b = static_cast<uint8_t>(120 + rng() % 6);
    return Mat{rows, cols, MatFormat::mxfp4, data, x.bytes.back().data()};
  };
  for (int64_t e = 0; e < kE; ++e) x.mats.push_back({mat(kI, kL), mat(kI, kL), mat(kL, kI)});
  return x;
}

void set_resident(const Experts& x, bool on) {
  for (const auto& b : x.bytes) {
    if (on) {
      cuda_make_resident(b.data(), b.size());
    } else {
      cuda_release_resident(b.data(), b.size());
    }
  }
}

TEST(MoeExpertsCuda, ResidentExpertTableFollowsTheArray) {
  if (!cuda_available() || kMoeExpertsOp.cuda == nullptr) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(7);
  const Experts a = random_experts(rng), b = random_experts(rng);
  std::normal_distribution<float> nd;
  std::vector<float> z(kT * kL), weight(kT * kK);
  for (float& v : z) v = nd(rng);
  for (float& v : weight) v = 0.1f + 0.5f * std::abs(nd(rng));
  const std::vector<int32_t> sel = {0, 2, 1, 3, 0, 3};  // [T, k], ascending per token
  Backend& be = cuda_backend();
  auto* dz = static_cast<float*>(be.alloc(z.size() * 4));
  auto* dw = static_cast<float*>(be.alloc(weight.size() * 4));
  auto* dsel = static_cast<int32_t*>(be.alloc(sel.size() * 4));
  auto* dc = static_cast<float*>(be.alloc(kT * kL * 4));
  be.copy_to_device(dz, z.data(), z.size() * 4);
  be.copy_to_device(dw, weight.data(), weight.size() * 4);
  be.copy_to_device(dsel, sel.data(), sel.size() * 4);
  const MoeExpertsShape s{kT, kK, kE, {4.0f, 25.0f}};
  std::vector<ExpertMats> table(kE);  // one array, its entries rewritten in place
  // max|got - want| / max|want| against the reference over the experts now in `table`.
  auto error = [&]() {
    kMoeExpertsOp.cuda(dz, dsel, dw, table.data(), s, dc);
    std::vector<float> got(kT * kL), want(kT * kL);
    be.copy_to_host(got.data(), dc, got.size() * 4);
    kMoeExpertsOp.ref(z.data(), sel.data(), weight.data(), table.data(), s, want.data());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::abs(double(got[i]) - want[i]));
      scale = std::max(scale, std::abs(double(want[i])));
    }
    return std::isfinite(worst) ? worst / scale : 1.0;
  };
  set_resident(a, true);
  set_resident(b, true);
  std::copy(a.mats.begin(), a.mats.end(), table.begin());
  EXPECT_LE(error(), 1e-5) << "experts a";
  EXPECT_LE(error(), 1e-5) << "experts a, again (the cached table)";
  std::copy(b.mats.begin(), b.mats.end(), table.begin());
  EXPECT_LE(error(), 1e-5) << "experts b in the same array";
  std::copy(a.mats.begin(), a.mats.end(), table.begin());
  EXPECT_LE(error(), 1e-5) << "experts a again";
  // a's device copies go (their memory taken and overwritten by junk) and come back elsewhere.
  set_resident(a, false);
  std::vector<void*> junk;
  for (const auto& x : a.bytes) {
    junk.push_back(be.alloc(x.size()));
    const std::vector<uint8_t> ff(x.size(), 0xFF);
    be.copy_to_device(junk.back(), ff.data(), ff.size());
  }
  set_resident(a, true);
  EXPECT_LE(error(), 1e-5) << "experts a, made resident again";
  set_resident(a, false);
  set_resident(b, false);
  for (void* p : junk) be.free(p);
  for (void* p : {static_cast<void*>(dz), static_cast<void*>(dw), static_cast<void*>(dsel),
                  static_cast<void*>(dc)})
    be.free(p);
}

}  // namespace
}  // namespace k3
