// Runtime instruction-set dispatch: detection, K3_ISA parsing and refusal of a path the CPU
// lacks. (Every kernel on every supported path is checked by the op harness itself.)
#include <gtest/gtest.h>

#include "core/cpu_isa.h"
#include "core/error.h"

namespace k3 {
namespace {

TEST(CpuIsa, ScalarAlwaysSupportedAndListIsOrdered) {
  const std::vector<Isa>& v = supported_isas();
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.front(), Isa::scalar);
  for (size_t i = 1; i < v.size(); ++i) EXPECT_LT(v[i - 1], v[i]);
  for (Isa i : v) EXPECT_TRUE(isa_supported(i));
}

TEST(CpuIsa, DetectionIsConsistent) {
  const CpuFeatures& f = cpu_features();
  // A path is offered only with its instructions and the OS saving its registers.
  if (isa_supported(Isa::avx2)) {
    EXPECT_TRUE(f.avx2 && f.fma && f.f16c && f.os_ymm);
  }
  if (isa_supported(Isa::avx512)) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.os_zmm);
  }
  if (!f.os_zmm) {
    EXPECT_FALSE(isa_supported(Isa::avx512));
  }
}

TEST(CpuIsa, ParsesNamesAndRejectsOthers) {
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512}) EXPECT_EQ(parse_isa(isa_name(i)), i);
  try {
    parse_isa("avx9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("avx9"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_isa(""), Error);
  EXPECT_THROW(parse_isa("AVX2 "), Error);
}

TEST(CpuIsa, SetIsaSwitchesAndRefusesUnsupported) {
  const Isa saved = active_isa();
  for (Isa i : supported_isas()) {
    set_isa(i);
    EXPECT_EQ(active_isa(), i);
  }
  for (Isa i : {Isa::avx2, Isa::avx512}) {
    if (isa_supported(i)) continue;
    try {
      set_isa(i);
      FAIL() << "accepted " << isa_name(i);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(isa_name(i)), std::string::npos) << e.what();
    }
  }
  set_isa(saved);
  EXPECT_EQ(active_isa(), saved);
}

// Kernels for a lower path are picked when a path lacks its own.
void scalar_fn() {}
void avx2_fn() {}
TEST(CpuIsa, PickFallsBackToLowerPath) {
  const Isa saved = active_isa();
  for (Isa i : supported_isas()) {
    set_isa(i);
    EXPECT_EQ(isa_pick<void()>(scalar_fn, avx2_fn, nullptr),
              i == Isa::scalar ? scalar_fn : avx2_fn);
    EXPECT_EQ(isa_pick<void()>(scalar_fn, nullptr, nullptr), scalar_fn);
  }
  set_isa(saved);
}

}  // namespace
}  // namespace k3
