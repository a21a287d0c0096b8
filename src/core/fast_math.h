// Float e^x, tanh and the logistic sigmoid for the training backward's element-wise maths:
// branch-free and inline, so loops that call them vectorise (libm's expf / tanhf are scalar
// calls). Accuracy (tests/ops/test_fast_math.cpp): exp within 3 ulp of e^x for x in
// [-87, 88] (outside it the argument is clamped: e^x saturates at e^-87 and e^88 instead of
// reaching 0 or infinity, harmless where it is used: 1 + e^x, products with small factors);
// tanh and sigmoid within 4e-7 relative everywhere.
//
// Not for the *_avx2.cpp / *_avx512.cpp files (core/cpu_isa.h: no shared inline functions).
#pragma once

#include <bit>
#include <cstdint>

namespace k3 {

// x clamped to [-87, 88] on its bits: the magnitude (a non-negative int, ordered like the
// float) capped at 87 or 88 by the sign. A float compare would not become a vector select
// without -fno-trapping-math, and a select to a constant gets its own branch (jump threading):
// one integer min of two variables is neither.
inline float clamp_exp_arg(float x) {
  constexpr int32_t kPos = std::bit_cast<int32_t>(88.0f), kNeg = std::bit_cast<int32_t>(87.0f);
  const uint32_t b = std::bit_cast<uint32_t>(x);
  const int32_t negative = static_cast<int32_t>(b >> 31);
  const int32_t mag = static_cast<int32_t>(b & 0x7fffffffu);
  const int32_t limit = kPos - negative * (kPos - kNeg);
  const int32_t capped = mag < limit ? mag : limit;
  return std::bit_cast<float>((b & 0x80000000u) | static_cast<uint32_t>(capped));
}

inline float exp_fast(float x) {
  x = clamp_exp_arg(x);
  // x = n ln2 + r, |r| <= ln2/2: n rounded by the 1.5·2^23 trick (the sum's low mantissa bits
  // hold n), ln2 split in a part exact in float and a correction.
  constexpr float kShift = 12582912.0f, kLog2e = 1.44269504f;
  constexpr float kLn2Hi = 0.693145752f, kLn2Lo = 1.42860677e-6f;
  const float t = x * kLog2e + kShift;
  const float n = t - kShift;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  // e^r by its Taylor series to r^7 (truncation < 5e-9 relative on |r| <= 0.347).
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t e = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kShift);  // n
  return p * std::bit_cast<float>((e + 127) << 23);
}

inline float sigmoid_fast(float x) { return 1.0f / (1.0f + exp_fast(-x)); }

inline float tanh_fast(float x) {
  const uint32_t sign = std::bit_cast<uint32_t>(x) & 0x80000000u;
  const float ax = std::bit_cast<float>(std::bit_cast<uint32_t>(x) ^ sign);
  // |x| >= 1/4: (1 − e^{-2|x|}) / (1 + e^{-2|x|}); below, where that would cancel, the odd
  // Taylor series to x^9 (truncation < 3e-9 relative).
  const float e = exp_fast(-2.0f * ax);
  const float big = (1.0f - e) / (1.0f + e);
  const float x2 = ax * ax;
  float s = 62.0f / 2835.0f;
  s = s * x2 - 17.0f / 315.0f;
  s = s * x2 + 2.0f / 15.0f;
  s = s * x2 - 1.0f / 3.0f;
  const float small = ax + ax * x2 * s;
  // Picked by a bit mask (|x| is a non-negative float: ordered as an integer), not a select,
  // whose arms the compiler would sink into branches.
  const uint32_t use_small =
      0u - static_cast<uint32_t>(std::bit_cast<int32_t>(ax) < std::bit_cast<int32_t>(0.25f));
  const uint32_t t =
      (std::bit_cast<uint32_t>(small) & use_small) | (std::bit_cast<uint32_t>(big) & ~use_small);
  return std::bit_cast<float>(t | sign);
}

}  // namespace k3
