// How each alternative of the pattern resolves under backtracking, from a position p:
//
// * Alternatives 2 and 3 try the optional prefix char first, then no prefix. With the prefix
//   taken, UPPER* LOWER+ from s succeeds iff the UPPER run from s is followed by a LOWER char
//   (then LOWER+ runs greedily) or contains a LOWER char (UPPER* gives back up to the last one,
//   and LOWER+ matches that single char, since the chars after it are UPPER-only). UPPER+ LOWER*
//   succeeds iff s starts an UPPER run. The contraction is then taken if present.
// * \s*[\r\n]+ ends just after the last CR/LF of the whitespace run at p, if it has one.
// * \s+(?!\S) takes the whole run at the end of the text, else the run less its last char
//   (when that leaves at least one); \s+ takes the rest (a single whitespace char).
#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

namespace k3::tok {

namespace {

constexpr size_t kNoMatch = 0;  // every alternative matches at least one char

class Scanner {
 public:
  Scanner(std::string_view text, const CharTable& table)
      : p_(reinterpret_cast<const unsigned char*>(text.data())), n_(text.size()), table_(table) {}

  size_t size() const { return n_; }
  // Code point at byte offset i (< size()), its byte length and its class flags.
  uint32_t at(size_t i, size_t* len, uint8_t* flags) const {
    uint32_t cp;
    if (p_[i] < 0x80) {
      *len = 1;
      cp = p_[i];
    } else {
      cp = decode_valid_utf8(p_ + i, len);
    }
    *flags = table_(cp);
    return cp;
  }
  // End of the run of chars from i that have any of `mask`'s flags.
  size_t run(size_t i, uint8_t mask) const {
    while (i < n_) {
      size_t len;
      uint8_t f;
      at(i, &len, &f);
      if (!(f & mask)) break;
      i += len;
    }
    return i;
  }
  unsigned char byte(size_t i) const { return i < n_ ? p_[i] : 0; }

 private:
  const unsigned char* p_;
  size_t n_;
  const CharTable& table_;
};

bool is_cr_lf(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: its end, or i. Under (?i), U+017F (long s) also matches s.
size_t contraction(const Scanner& s, size_t i) {
  if (s.byte(i) != '\'') return i;
  auto lower = [&](size_t j) -> int {
    unsigned char b = s.byte(j);
    if (b == 0xC5 && s.byte(j + 1) == 0xBF) return 's' | 0x100;  // U+017F, two bytes
    return (b >= 'A' && b <= 'Z') ? b + 32 : b;
  };
  auto width = [](int c) -> size_t { return c & 0x100 ? 2 : 1; };
  int c = lower(i + 1);
  switch (c & 0xFF) {
    case 's':
    case 't':
    case 'm':
    case 'd':
      return i + 1 + width(c);
    case 'r':
    case 'v':
      return lower(i + 2) == 'e' ? i + 3 : i;
    case 'l':
      return lower(i + 2) == 'l' ? i + 3 : i;
    default:
      return i;
  }
}

// UPPER* LOWER+ from i.
size_t word_lower_tail(const Scanner& s, size_t i) {
  size_t last_lower_end = kNoMatch;
  while (i < s.size()) {
    size_t len;
    uint8_t f;
    s.at(i, &len, &f);
    if (!(f & kUpper)) {
      if (f & kLower) return s.run(i, kLower);
      break;
    }
    if (f & kLower) last_lower_end = i + len;
    i += len;
  }
  return last_lower_end;
}

// UPPER+ LOWER* from i.
size_t word_upper_tail(const Scanner& s, size_t i) {
  size_t end = s.run(i, kUpper);
  return end == i ? kNoMatch : s.run(end, kLower);
}

// Alternatives 2 and 3.
size_t match_word(const Scanner& s, size_t p, uint32_t c0, size_t len0, uint8_t f0) {
  bool prefix = !is_cr_lf(c0) && !(f0 & (kLetter | kNumber));
  for (auto tail : {word_lower_tail, word_upper_tail}) {
    size_t end = prefix ? tail(s, p + len0) : kNoMatch;
    if (end == kNoMatch) end = tail(s, p);
    if (end != kNoMatch) return contraction(s, end);
  }
  return kNoMatch;
}

// \p{N}{1,3}
size_t match_digits(const Scanner& s, size_t p) {
  size_t i = p;
  for (int k = 0; k < 3 && i < s.size(); ++k) {
    size_t len;
    uint8_t f;
    s.at(i, &len, &f);
    if (!(f & kNumber)) break;
    i += len;
  }
  return i;
}

bool is_symbol(uint8_t f) { return !(f & (kSpace | kLetter | kNumber)); }

// ' '?[^\s\p{L}\p{N}]+[\r\n]*
size_t match_symbols(const Scanner& s, size_t p, uint32_t c0, uint8_t f0) {
  size_t start = p;
  if (c0 == ' ') {
    if (p + 1 >= s.size()) return kNoMatch;
    size_t len;
    uint8_t f;
    s.at(p + 1, &len, &f);
    if (!is_symbol(f)) return kNoMatch;
    start = p + 1;
  } else if (!is_symbol(f0)) {
    return kNoMatch;
  }
  size_t i = start;
  while (i < s.size()) {
    size_t len;
    uint8_t f;
    s.at(i, &len, &f);
    if (!is_symbol(f)) break;
    i += len;
  }
  while (s.byte(i) == '\r' || s.byte(i) == '\n') ++i;
  return i;
}

// Alternatives 6, 7 and 8, at a whitespace char.
size_t match_space(const Scanner& s, size_t p) {
  size_t i = p, last_start = p, after_crlf = kNoMatch;
  int count = 0;
  while (i < s.size()) {
    size_t len;
    uint8_t f;
    uint32_t cp = s.at(i, &len, &f);
    if (!(f & kSpace)) break;
    if (is_cr_lf(cp)) after_crlf = i + 1;
    last_start = i;
    i += len;
    ++count;
  }
  if (after_crlf != kNoMatch) return after_crlf;
  if (i == s.size() || count == 1) return i;
  return last_start;
}

size_t match_at(const Scanner& s, size_t p) {
  size_t len0;
  uint8_t f0;
  uint32_t c0 = s.at(p, &len0, &f0);
  if (f0 & kHan) return s.run(p, kHan);
  if (size_t end = match_word(s, p, c0, len0, f0)) return end;
  if (f0 & kNumber) return match_digits(s, p);
  if (size_t end = match_symbols(s, p, c0, f0)) return end;
  if (f0 & kSpace) return match_space(s, p);
  return p + len0;  // unreachable: every char is Han, a letter, a digit, a symbol or a space
}

}  // namespace

void pretokenize(std::string_view text, std::vector<Span>& out) {
  Scanner s(text, char_table());
  size_t p = 0;
  while (p < s.size()) {
    size_t end = match_at(s, p);
    out.push_back({static_cast<uint32_t>(p), static_cast<uint32_t>(end)});
    p = end;
  }
}

}  // namespace k3::tok
