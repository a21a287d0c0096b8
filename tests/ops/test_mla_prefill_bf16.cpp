// The expanded MLA attention in bf16 precision on the device (the flash kernel of
// backend/cuda/mla_prefill.cu, taken for the K3 head widths Dq = 192, Dv = 128) against the
// double reference on fp32 inputs. q, k, v and P are rounded to bf16 once each, so the bound
// is its own: 1e-2 of max|want| (measured values are printed; the fp32 path keeps the op's
// 2e-5 in test_mla_attnres.cpp). Shapes: one query, partial and whole 64-query tiles, several
// key tiles, cached rows before the queries (n_past), several heads. Skipped without a device.
#include <gtest/gtest.h>

#include <cstdio>

#include "backend/cuda/cuda.h"
#include "core/precision.h"
#include "ops/harness.h"
#include "ops/mla/mla.h"

namespace k3::test {
namespace {

TEST(MlaPrefillBf16, CudaMatchesDoubleReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Precision saved = active_precision();
  set_precision(Precision::bf16);
  cuda_set_host_staging(true);  // host pointers in and out, as the op harness does
  for (auto [T, n_past, H] : {std::tuple<int64_t, int64_t, int64_t>{1, 0, 1},
                              {17, 0, 2},
                              {64, 0, 1},
                              {65, 0, 3},
                              {200, 37, 2},
                              {300, 0, 2},
                              {5, 130, 1},
                              {129, 64, 1}}) {
    const MlaShape s{T, n_past, H, 128, 64, 128, 512};
    std::mt19937_64 rng(T * 7919 + n_past * 31 + H);
    const int64_t S = n_past + T, Dq = s.Dn + s.Dr;
    const std::vector<float> q = randn(rng, T * H * Dq, 0.5);
    const std::vector<float> k = randn(rng, S * H * Dq), v = randn(rng, S * H * s.Dv);
    std::vector<float> got(T * H * s.Dv), want(got.size());
    kMlaExpandedOp.get(Impl::cuda)(q.data(), k.data(), v.data(), s, got.data());
    kMlaExpandedOp.ref(q.data(), k.data(), v.data(), s, want.data());
    const double err = rel_max_error(got, widen(want));
    std::printf("mla prefill bf16 T=%lld n_past=%lld H=%lld: rel max error %.2e\n", (long long)T,
                (long long)n_past, (long long)H, err);
    EXPECT_LE(err, 1e-2) << "T=" << T << " n_past=" << n_past << " H=" << H;
  }
  cuda_set_host_staging(false);
  set_precision(saved);
}

}  // namespace
}  // namespace k3::test
