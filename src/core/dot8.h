// A plain fp32 dot product in 8 independent partial sums: one running sum is a chain of
// dependent adds (latency bound), and 8 lanes let the compiler vectorise without -ffast-math.
// The summation order depends on n alone, so a row's result does not depend on what else is
// in the batch (the batch-invariance tests rely on that).
#pragma once

#include <cstdint>

namespace k3 {

inline float dot8(const float* a, const float* b, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  }
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

}  // namespace k3
