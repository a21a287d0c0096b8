// UTF-8 helpers for the tokenizer: strict validation (what encode accepts), decoding of text
// already validated, and decoding of arbitrary bytes with U+FFFD replacement exactly as Python's
// bytes.decode("utf-8", "replace") does it (tiktoken's decode): each maximal prefix of a
// well-formed sequence that cannot be completed becomes one U+FFFD, and so does each byte that
// cannot start a sequence (Unicode §3.9, "substitution of maximal subparts").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "k3/tokenizer.h"

namespace k3::tok {

// k3::find_invalid_utf8 (public, k3/tokenizer.h): the byte offset of the first ill-formed byte.
using ::k3::find_invalid_utf8;

// Decodes the code point at p of text known to be valid UTF-8; sets *len to its byte length.
inline uint32_t decode_valid_utf8(const unsigned char* p, size_t* len) {
  unsigned char b = p[0];
  if (b < 0x80) {
    *len = 1;
    return b;
  }
  if (b < 0xE0) {
    *len = 2;
    return (uint32_t(b & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b < 0xF0) {
    *len = 3;
    return (uint32_t(b & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  *len = 4;
  return (uint32_t(b & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) | (uint32_t(p[2] & 0x3F) << 6) |
         (p[3] & 0x3F);
}

// Appends bytes[0, n) to `out` as valid UTF-8, replacing ill-formed parts with U+FFFD. With
// `final` false, an incomplete but so-far well-formed sequence at the very end is left
// unconsumed; the return value is the number of bytes consumed (always n when `final`).
size_t append_utf8_replacing(std::string& out, const unsigned char* bytes, size_t n, bool final);

// The whole of `bytes` decoded with replacement.
std::string utf8_replace_invalid(std::string_view bytes);

// Decodes bytes that arrive in pieces (e.g. one token at a time) and never returns half a
// character: push() returns the text completed so far; finish() flushes a trailing incomplete
// sequence as U+FFFD. The concatenated output equals utf8_replace_invalid(all bytes).
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  std::string finish();

 private:
  std::string pending_;  // at most 3 bytes of an incomplete, so-far well-formed sequence
};

}  // namespace k3::tok
