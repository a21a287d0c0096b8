// Checks shared by the linear tests.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "ops/linear/linear.h"

namespace k3::test {

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
