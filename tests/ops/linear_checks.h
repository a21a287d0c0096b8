// Checks shared by the linear tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "ops/linear/linear.h"

namespace k3::test {

inline const char* format_name(MatFormat f) {
  return f == MatFormat::bf16 ? "bf16" : f == MatFormat::f32 ? "f32" : "mxfp4";
}

struct Ref {
  std::vector<double> y;  // [T, rows]
  double scale = 0;       // max over outputs of Σ|x_i·w_i|: the fp32 cases' measure
};

// Plain double linear, never optimised, on x or (round_x) on x rounded to bf16.
inline Ref reference_linear(const std::vector<float>& x, int64_t T, const Mat& w, bool round_x) {
  Ref ref;
  ref.y.assign(T * w.rows, 0.0);
  std::vector<float> row(w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    mat_row(w, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      double acc = 0, mag = 0;
      for (int64_t i = 0; i < w.cols; ++i) {
        const float xi = x[t * w.cols + i];
        const double p = double(round_x ? bf16_to_f32(f32_to_bf16(xi)) : xi) * row[i];
        acc += p;
        mag += std::fabs(p);
      }
      ref.y[t * w.rows + r] = acc;
      ref.scale = std::max(ref.scale, mag);
    }
  }
  return ref;
}

// (rows, columns) of an AMX tile task: every tile count (1..4 full tiles, more, and tails of
// 1..15 rows), one to many 32-column chunks.
inline const std::vector<std::pair<int64_t, int64_t>> kAmxTaskShapes = {
    {1, 32}, {15, 64}, {16, 96}, {17, 32}, {33, 160}, {48, 64}, {64, 256}, {70, 1024}};

// Batch invariance: linear over the first T tokens of x gives, for each T, exactly `one` (the
// same tokens run one at a time).
inline void expect_batch_invariant(const std::vector<float>& x, const Mat& w,
                                   const std::vector<float>& one,
                                   std::initializer_list<int64_t> token_counts,
                                   const std::string& what) {
  for (int64_t T : token_counts) {
    std::vector<float> all(T * w.rows);
    linear(x.data(), T, w, all.data());
    for (int64_t i = 0; i < T * w.rows; ++i)
      ASSERT_EQ(all[i], one[i]) << what << " T=" << T << " i=" << i;
  }
}

}  // namespace k3::test
