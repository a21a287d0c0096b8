#include "ops/mxfp4/mxfp4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu_isa.h"
#include "ops/linear/linear_kernels.h"

namespace k3 {
namespace {

constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// 2^(s-127). Exponents 1..254 are built directly as float bits (the hot path); 0 (2^-127, a
// subnormal) and 255 (NaN in the OCP spec; not expected) go through ldexp.
float e8m0(uint8_t s) {
  if (s == 0 || s == 255) return std::ldexp(1.0f, static_cast<int>(s) - 127);
  const uint32_t bits = static_cast<uint32_t>(s) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float nibble_value(uint8_t n) {
  float m = kMagnitude[n & 7];
  return (n & 8) ? -m : m;
}

// Nearest E2M1 code to x (already divided by the scale); ties go to the smaller magnitude.
uint8_t nearest_code(float x) {
  uint8_t sign = std::signbit(x) ? 8 : 0;
  float a = std::fabs(x);
  uint8_t best = 0;
  for (uint8_t m = 1; m < 8; ++m) {
    if (std::fabs(kMagnitude[m] - a) < std::fabs(kMagnitude[best] - a)) best = m;
  }
  return static_cast<uint8_t>(best | sign);
}

}  // namespace

float mxfp4_value_ref(const uint8_t* packed_row, const uint8_t* scale_row, int64_t i) {
  uint8_t byte = packed_row[i / 2];
  uint8_t n = (i % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
  return nibble_value(n) * e8m0(scale_row[i / kMxfp4Group]);
}

namespace {

// Signed E2M1 magnitudes by nibble code.
struct CodeTable {
  float v[16];
};
const CodeTable& code_table() {
  static const CodeTable t = [] {
    CodeTable c{};
    for (int n = 0; n < 16; ++n) c.v[n] = nibble_value(static_cast<uint8_t>(n));
    return c;
  }();
  return t;
}

}  // namespace

void mxfp4_decode_row(const uint8_t* packed_row, const uint8_t* scale_row, int64_t cols,
                      float* out) {
  using DecodeFn = void(const uint8_t*, const uint8_t*, int64_t, float*);
  DecodeFn* simd = isa_pick<DecodeFn>(nullptr, avx2::kLinearKernels.mxfp4_decode,
                                      avx512::kLinearKernels.mxfp4_decode);
  if (simd != nullptr) {
    simd(packed_row, scale_row, cols, out);
    return;
  }
  const CodeTable& t = code_table();
  for (int64_t g = 0; g < cols / kMxfp4Group; ++g) {
    const float s = e8m0(scale_row[g]);
    const uint8_t* p = packed_row + g * (kMxfp4Group / 2);
    float* o = out + g * kMxfp4Group;
    for (int64_t j = 0; j < kMxfp4Group / 2; ++j) {
      o[2 * j] = t.v[p[j] & 0x0f] * s;
      o[2 * j + 1] = t.v[p[j] >> 4] * s;
    }
  }
}

void mxfp4_encode_row(const float* values, const uint8_t* scale_row, int64_t cols,
                      uint8_t* packed_row) {
  for (int64_t j = 0; j < cols / 2; ++j) {
    float s = e8m0(scale_row[(2 * j) / kMxfp4Group]);
    uint8_t lo = nearest_code(values[2 * j] / s);
    uint8_t hi = nearest_code(values[2 * j + 1] / s);
    packed_row[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

uint8_t mxfp4_choose_scale(const float* group, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(group[i]));
  if (amax == 0.0f) return 127;
  int e = static_cast<int>(std::ceil(std::log2(amax / 6.0f)));
  e = std::clamp(e, -127, 127);
  return static_cast<uint8_t>(e + 127);
}

}  // namespace k3
