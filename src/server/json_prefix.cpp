#include "server/json_prefix.h"

#include <cstring>

namespace k3::server {
namespace {

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

int hex_digit(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_high_surrogate(uint32_t v) { return v >= 0xD800 && v <= 0xDBFF; }
bool is_surrogate(uint32_t v) { return v >= 0xD800 && v <= 0xDFFF; }

// The values a \u escape can still take: [lo, hi] after `have` digits of value `v`.
struct HexRange {
  uint32_t lo, hi;
};
HexRange hex_range(uint32_t v, int left) {
  const uint32_t span = 1u << (4 * left);
  return {v * span, v * span + span - 1};
}

}  // namespace

bool JsonPrefix::push(unsigned char c) {
  JsonPrefix next = *this;
  next.space_run_ = 0;  // only whitespace between tokens continues a run
  bool ok = false;
  switch (mode_) {
    case Mode::string:
      ok = next.push_string(c);
      break;
    case Mode::escape:
      if (std::strchr("\"\\/bfnrt", c) != nullptr && c != 0) {
        next.mode_ = Mode::string;
        ok = true;
      } else if (c == 'u') {
        next.mode_ = Mode::hex;
        next.hex_left_ = 4;
        next.hex_value_ = 0;
        ok = true;
      }
      break;
    case Mode::hex:
      ok = next.push_hex(c);
      break;
    case Mode::low_backslash:
      ok = c == '\\';
      next.mode_ = Mode::low_u;
      break;
    case Mode::low_u:
      ok = c == 'u';
      next.mode_ = Mode::hex;
      next.hex_left_ = 4;
      next.hex_value_ = 0;
      next.want_low_ = true;
      break;
    case Mode::minus:
    case Mode::zero:
    case Mode::integer:
    case Mode::dot:
    case Mode::fraction:
    case Mode::exp_mark:
    case Mode::exp_sign:
    case Mode::exponent: {
      bool ended = false;
      ok = next.push_number(c, ended);
      if (ok && ended) ok = next.structural(c);  // the byte after the number
      break;
    }
    case Mode::literal:
      ok = c == static_cast<unsigned char>(*next.literal_);
      if (ok && *++next.literal_ == '\0') next.value_done();
      break;
    default:
      next.space_run_ = space_run_;
      ok = next.structural(c);
  }
  if (ok) *this = next;
  return ok;
}

bool JsonPrefix::open(bool object) {
  if (depth_ >= kMaxDepth) return false;
  if (object) {
    kinds_ |= uint64_t{1} << depth_;
  } else {
    kinds_ &= ~(uint64_t{1} << depth_);
  }
  ++depth_;
  mode_ = object ? Mode::object_first : Mode::array_first;
  return true;
}

bool JsonPrefix::close(unsigned char c) {
  if (depth_ == 0 || (c == '}') != in_object()) return false;
  --depth_;
  mode_ = depth_ == 0 ? Mode::done : Mode::after_value;
  return true;
}

bool JsonPrefix::structural(unsigned char c) {
  if (is_space(c)) {
    if (mode_ == Mode::start || mode_ == Mode::done || space_run_ >= kMaxSpaceRun) return false;
    ++space_run_;
    return true;
  }
  space_run_ = 0;
  switch (mode_) {
    case Mode::start:
      return c == '{' && open(true);
    case Mode::object_first:
    case Mode::object_key:
      if (c == '}' && mode_ == Mode::object_first) return close(c);
      if (c != '"') return false;
      mode_ = Mode::string;
      key_ = true;
      return true;
    case Mode::colon:
      if (c != ':') return false;
      mode_ = Mode::value;
      return true;
    case Mode::after_value:
      if (c == ',') {
        mode_ = in_object() ? Mode::object_key : Mode::value;
        return true;
      }
      return (c == '}' || c == ']') && close(c);
    case Mode::value:
    case Mode::array_first:
      break;
    default:
      return false;
  }
  // A value starts (or an empty array closes).
  if (c == ']' && mode_ == Mode::array_first) return close(c);
  switch (c) {
    case '{':
      return open(true);
    case '[':
      return open(false);
    case '"':
      mode_ = Mode::string;
      key_ = false;
      return true;
    case '-':
      mode_ = Mode::minus;
      return true;
    case '0':
      mode_ = Mode::zero;
      return true;
    case 't':
      literal_ = "rue";
      break;
    case 'f':
      literal_ = "alse";
      break;
    case 'n':
      literal_ = "ull";
      break;
    default:
      if (!is_digit(c)) return false;
      mode_ = Mode::integer;
      return true;
  }
  mode_ = Mode::literal;
  return true;
}

bool JsonPrefix::push_string(unsigned char c) {
  if (utf8_left_ > 0) {
    if (c < utf8_lo_ || c > utf8_hi_) return false;
    --utf8_left_;
    utf8_lo_ = 0x80;
    utf8_hi_ = 0xBF;
    return true;
  }
  if (c == '"') {
    if (key_) {
      mode_ = Mode::colon;
    } else {
      value_done();
    }
    return true;
  }
  if (c == '\\') {
    mode_ = Mode::escape;
    return true;
  }
  if (c < 0x20) return false;
  if (c < 0x80) return true;
  // A UTF-8 lead byte: how many continuation bytes follow, and the range of the first (which
  // rules out overlong forms, surrogates and code points above U+10FFFF).
  utf8_lo_ = 0x80;
  utf8_hi_ = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    utf8_left_ = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    utf8_left_ = 2;
    if (c == 0xE0) utf8_lo_ = 0xA0;
    if (c == 0xED) utf8_hi_ = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    utf8_left_ = 3;
    if (c == 0xF0) utf8_lo_ = 0x90;
    if (c == 0xF4) utf8_hi_ = 0x8F;
  } else {
    return false;
  }
  return true;
}

bool JsonPrefix::push_hex(unsigned char c) {
  const int d = hex_digit(c);
  if (d < 0) return false;
  const uint32_t v = hex_value_ * 16u + static_cast<uint32_t>(d);
  const int left = hex_left_ - 1;
  const HexRange r = hex_range(v, left);
  if (want_low_) {
    if (r.hi < 0xDC00 || r.lo > 0xDFFF) return false;  // cannot be a low surrogate any more
  } else if (r.lo >= 0xDC00 && r.hi <= 0xDFFF) {
    return false;  // a low surrogate without a high one before it
  }
  hex_value_ = static_cast<uint16_t>(v);
  hex_left_ = static_cast<uint8_t>(left);
  if (left > 0) return true;
  if (want_low_) {
    want_low_ = false;
    mode_ = Mode::string;
  } else {
    mode_ = is_high_surrogate(v) ? Mode::low_backslash : Mode::string;
  }
  return true;
}

bool JsonPrefix::push_number(unsigned char c, bool& ended) {
  const bool digit = is_digit(c);
  const bool exp = c == 'e' || c == 'E';
  switch (mode_) {
    case Mode::minus:
      if (!digit) return false;
      mode_ = c == '0' ? Mode::zero : Mode::integer;
      return true;
    case Mode::zero:
    case Mode::integer:
      if (digit && mode_ == Mode::integer) return true;
      if (c == '.') {
        mode_ = Mode::dot;
      } else if (exp) {
        mode_ = Mode::exp_mark;
      } else {
        ended = !digit;  // a digit after a leading 0 is refused
        if (ended) value_done();
        return ended;
      }
      return true;
    case Mode::dot:
      if (!digit) return false;
      mode_ = Mode::fraction;
      return true;
    case Mode::fraction:
      if (digit) return true;
      if (exp) {
        mode_ = Mode::exp_mark;
        return true;
      }
      break;
    case Mode::exp_mark:
      if (c == '+' || c == '-') {
        mode_ = Mode::exp_sign;
        return true;
      }
      [[fallthrough]];
    case Mode::exp_sign:
      if (!digit) return false;
      mode_ = Mode::exponent;
      return true;
    case Mode::exponent:
      if (digit) return true;
      break;
    default:
      return false;
  }
  ended = true;  // fraction or exponent: this byte is the one after the number
  value_done();
  return true;
}

int64_t JsonPrefix::finish_size() const {
  const int64_t string_end = key_ ? 3 : 1;  // `"` (and `:0` after a key)
  switch (mode_) {
    case Mode::object_key:
      return 4;  // "":0
    case Mode::colon:
      return 2;  // :0
    case Mode::value:
    case Mode::minus:
    case Mode::dot:
    case Mode::exp_mark:
    case Mode::exp_sign:
      return 1;  // a digit
    case Mode::string:
      return utf8_left_ + string_end;
    case Mode::escape:
      return 1 + string_end;
    case Mode::hex: {
      const HexRange r = hex_range(hex_value_, hex_left_);
      const bool forced_high = !want_low_ && is_surrogate(r.lo) && r.hi <= 0xDFFF;
      return hex_left_ + (forced_high ? 6 : 0) + string_end;
    }
    case Mode::low_backslash:
      return 6 + string_end;  // \uDC00
    case Mode::low_u:
      return 5 + string_end;
    case Mode::literal:
      return static_cast<int64_t>(std::strlen(literal_));
    default:
      return 0;
  }
}

int64_t JsonPrefix::closing_size() const {
  if (mode_ == Mode::start) return 2;
  return finish_size() + depth_;
}

std::string JsonPrefix::closing() const {
  if (mode_ == Mode::start) return "{}";
  std::string out;
  const char* string_end = key_ ? "\":0" : "\"";
  static const char kHex[] = "0123456789ABCDEF";
  switch (mode_) {
    case Mode::object_key:
      out = "\"\":0";
      break;
    case Mode::colon:
      out = ":0";
      break;
    case Mode::value:
    case Mode::minus:
    case Mode::dot:
    case Mode::exp_mark:
    case Mode::exp_sign:
      out = "0";
      break;
    case Mode::string:
      for (int i = 0; i < utf8_left_; ++i) out += static_cast<char>(i == 0 ? utf8_lo_ : 0x80);
      out += string_end;
      break;
    case Mode::escape:
      out = std::string("n") + string_end;
      break;
    case Mode::hex: {
      // The smallest value the escape may still become, a surrogate only when it must be.
      const HexRange r = hex_range(hex_value_, hex_left_);
      uint32_t v = r.lo;
      if (want_low_) {
        v = r.lo < 0xDC00 ? 0xDC00 : r.lo;
      } else if (is_surrogate(v)) {
        v = r.hi > 0xDFFF ? 0xE000 : r.lo;
      }
      for (int i = hex_left_ - 1; i >= 0; --i) out += kHex[(v >> (4 * i)) & 0xF];
      if (!want_low_ && is_high_surrogate(v)) out += "\\uDC00";
      out += string_end;
      break;
    }
    case Mode::low_backslash:
      out = std::string("\\uDC00") + string_end;
      break;
    case Mode::low_u:
      out = std::string("uDC00") + string_end;
      break;
    case Mode::literal:
      out = literal_;
      break;
    default:
      break;
  }
  for (int d = depth_ - 1; d >= 0; --d) out += ((kinds_ >> d) & 1) != 0 ? '}' : ']';
  return out;
}

}  // namespace k3::server
