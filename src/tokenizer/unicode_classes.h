// Character classes of K3's pre-tokenizer regex (spec §10.3), one bit each, for every Unicode
// scalar value. The runs in unicode_tables.cpp are generated from tiktoken's own regex engine by
// tests/reference/make_unicode_tables.py, so they follow tiktoken's Unicode version and its
// reading of \p{Han} (the Script property, not Script_Extensions: U+3001 "、" is not Han).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3::tok {

enum CharFlag : uint8_t {
  kHan = 1,     // [\p{Han}]
  kLetter = 2,  // \p{L}
  kNumber = 4,  // \p{N}
  kUpper = 8,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
  kLower = 16,  // [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
  kSpace = 32,  // \s (Unicode White_Space)
};

struct UnicodeRun {
  uint32_t start;  // first code point of the run
  uint8_t flags;   // CharFlag bits shared by every code point up to the next run's start
};

extern const UnicodeRun kUnicodeRuns[];
extern const size_t kUnicodeRunCount;

// A two-stage lookup table built once from kUnicodeRuns (blocks of 128 code points).
class CharTable {
 public:
  CharTable();
  uint8_t operator()(uint32_t cp) const {
    if (cp >= 0x110000) return 0;
    return blocks_[static_cast<size_t>(index_[cp >> 7]) * 128 + (cp & 127)];
  }

 private:
  std::vector<uint16_t> index_;  // block of 128 code points -> distinct block number
  std::vector<uint8_t> blocks_;  // the distinct blocks, 128 flags each
};

// The process-wide table (built on first use, thread-safe).
const CharTable& char_table();

// Python's str.isspace(), which K3's 25,000-run rule uses: \s plus U+001C..U+001F.
inline bool py_isspace(uint32_t cp, uint8_t flags) {
  return (flags & kSpace) || (cp >= 0x1C && cp <= 0x1F);
}

}  // namespace k3::tok
