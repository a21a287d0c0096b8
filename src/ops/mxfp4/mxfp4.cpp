#include "ops/mxfp4/mxfp4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12 flags its own AVX-512 intrinsics (an undefined-vector idiom) as uninitialised.
#if !defined(__clang__)  // clang does not know the second one
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

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

#if defined(__AVX512F__)
// One group of 32 values (16 packed bytes) as two vectors, elements 0-15 and 16-31: both
// nibbles are looked up in the scaled 16-entry table with one permute each, then interleaved
// (low nibble = even element).
struct GroupDecoder {
  __m512 table = _mm512_loadu_ps(code_table().v);
  __m512i even = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  __m512i odd = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  __m512i low4 = _mm512_set1_epi32(0x0f);

  void operator()(const uint8_t* bytes16, uint8_t scale, __m512& first, __m512& second) const {
    const __m512 scaled = _mm512_mul_ps(table, _mm512_set1_ps(e8m0(scale)));
    const __m512i b =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16)));
    const __m512 lo = _mm512_permutexvar_ps(_mm512_and_si512(b, low4), scaled);
    const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), scaled);
    first = _mm512_permutex2var_ps(lo, even, hi);
    second = _mm512_permutex2var_ps(lo, odd, hi);
  }
};
#endif

}  // namespace

void mxfp4_decode_row(const uint8_t* packed_row, const uint8_t* scale_row, int64_t cols,
                      float* out) {
#if defined(__AVX512F__)
  const GroupDecoder decode;
  for (int64_t g = 0; g < cols / kMxfp4Group; ++g) {
    __m512 a, b;
    decode(packed_row + g * (kMxfp4Group / 2), scale_row[g], a, b);
    _mm512_storeu_ps(out + g * kMxfp4Group, a);
    _mm512_storeu_ps(out + g * kMxfp4Group + 16, b);
  }
#else
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
#endif
}

float mxfp4_dot_row(const uint8_t* packed_row, const uint8_t* scale_row, const float* x,
                    int64_t cols) {
#if defined(__AVX512F__)
  const GroupDecoder decode;
  // One accumulator over 16-column chunks in order: the same arithmetic as decoding the row
  // and taking linear's canonical dot, so results do not depend on the path (batch invariance).
  __m512 acc = _mm512_setzero_ps();
  for (int64_t g = 0; g < cols / kMxfp4Group; ++g) {
    __m512 a, b;
    decode(packed_row + g * (kMxfp4Group / 2), scale_row[g], a, b);
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + g * kMxfp4Group), a, acc);
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + g * kMxfp4Group + 16), b, acc);
  }
  return _mm512_reduce_add_ps(acc);
#else
  float row[kMxfp4Group];
  float acc = 0;
  for (int64_t g = 0; g < cols / kMxfp4Group; ++g) {
    mxfp4_decode_row(packed_row + g * (kMxfp4Group / 2), scale_row + g, kMxfp4Group, row);
    for (int64_t i = 0; i < kMxfp4Group; ++i) acc += x[g * kMxfp4Group + i] * row[i];
  }
  return acc;
#endif
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
