// The decode path of moe_experts (one or two tokens: two parallel loops over all chosen
// experts' rows) gives every token the same bits as the general path gives it inside a larger
// step, on fresh random inputs, for every format and instruction set: batch invariance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "core/cpu_isa.h"
#include "core/precision.h"
#include "ops/moe/moe_experts.h"
#include "ops/moe/moe_experts_decode.h"

namespace k3 {
namespace {

struct Storage {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<ExpertMats> mats;
};

Mat random_mat(int64_t rows, int64_t cols, MatFormat f, std::mt19937_64& rng, Storage& st) {
  Mat m{rows, cols, f, nullptr, nullptr};
  const size_t n = static_cast<size_t>(rows * cols);
  std::normal_distribution<float> nd(0.0f, 1.0f / std::sqrt(float(cols)));
  if (f == MatFormat::mxfp4) {
    st.bytes.emplace_back(n / 2);
    for (auto& b : st.bytes.back()) b = static_cast<uint8_t>(rng());
    m.data = st.bytes.back().data();
    st.bytes.emplace_back(n / 32);
    for (auto& b : st.bytes.back()) b = static_cast<uint8_t>(120 + rng() % 6);
    m.scales = st.bytes.back().data();
  } else if (f == MatFormat::bf16) {
    st.bytes.emplace_back(n * 2);
    auto* p = reinterpret_cast<uint16_t*>(st.bytes.back().data());
    for (size_t i = 0; i < n; ++i) p[i] = f32_to_bf16(nd(rng));
    m.data = p;
  } else {
    st.bytes.emplace_back(n * 4);
    auto* p = reinterpret_cast<float*>(st.bytes.back().data());
    for (size_t i = 0; i < n; ++i) p[i] = nd(rng);
    m.data = p;
  }
  return m;
}

// Token rows [0, T) run alone (the decode path) and as the first rows of a 5-token step
// (the general path): the bits must agree.
void check_same_bits(int64_t T, int64_t k, int64_t E, int64_t L, int64_t I, MatFormat f,
                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  Storage st;
  st.bytes.reserve(static_cast<size_t>(6 * E));
  for (int64_t e = 0; e < E; ++e)
    st.mats.push_back(
        {random_mat(I, L, f, rng, st), random_mat(I, L, f, rng, st), random_mat(L, I, f, rng, st)});
  constexpr int64_t kBig = 5;
  std::normal_distribution<float> nd;
  std::vector<float> z(kBig * L), weight(kBig * k);
  for (float& v : z) v = nd(rng);
  for (float& v : weight) v = 0.05f + std::uniform_real_distribution<float>()(rng);
  std::vector<int32_t> sel(kBig * k), ids(E);
  for (int64_t t = 0; t < kBig; ++t) {
    for (int64_t e = 0; e < E; ++e) ids[e] = static_cast<int32_t>(e);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::sort(ids.begin(), ids.begin() + k);
    std::copy_n(ids.begin(), k, sel.begin() + t * k);
  }
  const MoeExpertsShape small{T, k, E, {4.0f, 25.0f}}, big{kBig, k, E, {4.0f, 25.0f}};
  std::vector<float> c_small(T * L), c_big(kBig * L);
  ASSERT_TRUE(moe_experts_decode(z.data(), sel.data(), weight.data(), st.mats.data(), small,
                                 c_small.data()));
  moe_experts(z.data(), sel.data(), weight.data(), st.mats.data(), big, c_big.data());
  for (int64_t i = 0; i < T * L; ++i)
    ASSERT_EQ(std::memcmp(&c_small[i], &c_big[i], 4), 0)
        << "T=" << T << " k=" << k << " L=" << L << " I=" << I << " element " << i << ": "
        << c_small[i] << " vs " << c_big[i];
}

TEST(MoeExpertsDecode, SameBitsAsInALargerStep) {
  uint64_t seed = 1;
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    for (MatFormat f : {MatFormat::mxfp4, MatFormat::bf16, MatFormat::f32}) {
      for (int64_t T : {1, 2}) {
        SCOPED_TRACE(isa_name(isa));
        check_same_bits(T, 2, 5, 64, 32, f, seed++);
        check_same_bits(T, 4, 6, 128, 96, f, seed++);  // rows past one 16-row task
        if (f != MatFormat::mxfp4) check_same_bits(T, 3, 4, 40, 24, f, seed++);  // off the lanes
      }
    }
  }
  set_isa(saved);
}

// In q8 precision (core/precision.h) the decode path quantises each choice's rows once and runs
// the int8 kernel on them; the general path quantises inside each linear: the same bits.
TEST(MoeExpertsDecode, SameBitsAsInALargerStepInQ8Precision) {
  uint64_t seed = 100;
  const Isa saved = active_isa();
  set_precision(Precision::q8);
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    for (int64_t T : {1, 2}) {
      SCOPED_TRACE(isa_name(isa));
      check_same_bits(T, 2, 5, 64, 32, MatFormat::mxfp4, seed++);
      check_same_bits(T, 4, 6, 544, 96, MatFormat::mxfp4, seed++);  // a partial window
    }
  }
  set_precision(Precision::fp32);
  set_isa(saved);
}

TEST(MoeExpertsDecode, DeclinesLargerSteps) {
  const MoeExpertsShape s{kMoeDecodeMaxTokens + 1, 1, 1, {4.0f, 25.0f}};
  EXPECT_FALSE(moe_experts_decode(nullptr, nullptr, nullptr, nullptr, s, nullptr));
}

}  // namespace
}  // namespace k3
