// A byte-at-a-time recogniser of JSON object text prefixes (RFC 8259, top level an object), for
// constrained decoding (response_format json_object): push() refuses exactly the bytes after
// which no continuation could make the text a JSON object, complete() says the object closed,
// and closing() is a shortest continuation that closes it. The state is a small value: copy it
// to try a token.
//
// Strings must be valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF) and
// a \u escape of a surrogate must be a high one followed by a low one, as strict parsers
// (nlohmann, serde) require. Containers nest at most kMaxDepth deep. Whitespace may not come
// before the object nor after it (the answer starts with '{' and ends where the object closes),
// and at most kMaxSpaceRun bytes of it in a row (a model cannot fill its answer with it).
#pragma once

#include <cstdint>
#include <string>

namespace k3::server {

class JsonPrefix {
 public:
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxSpaceRun = 20;  // whitespace bytes in a row between tokens

  bool push(unsigned char c);  // false (state unchanged) when c makes the prefix invalid
  bool complete() const { return mode_ == Mode::done; }
  // A shortest text that completes the object from here; empty once complete.
  std::string closing() const;
  int64_t closing_size() const;  // closing().size(), without building it

 private:
  enum class Mode : uint8_t {
    start,          // before the top-level '{'
    object_first,   // after '{': a key or '}'
    object_key,     // after ',' in an object: a key
    colon,          // after a key
    value,          // after ':' or ',' in an array
    array_first,    // after '[': a value or ']'
    after_value,    // ',' or the container's closer
    string,         // inside a string (key_ says which kind)
    escape,         // after '\'
    hex,            // in \uXXXX, hex_left_ digits to go
    low_backslash,  // after a high surrogate escape: must be '\'
    low_u,          // ... then 'u'
    minus,          // number: after '-'
    zero,           // number: a lone leading 0
    integer,        // number: digits
    dot,            // number: after '.'
    fraction,       // number: digits after '.'
    exp_mark,       // number: after 'e' / 'E'
    exp_sign,       // number: after the exponent's sign
    exponent,       // number: exponent digits
    literal,        // in true / false / null
    done,           // the top-level object closed
  };

  bool in_object() const { return depth_ > 0 && ((kinds_ >> (depth_ - 1)) & 1) != 0; }
  bool open(bool object);
  bool close(unsigned char c);  // '}' or ']'
  void value_done() { mode_ = Mode::after_value; }
  bool push_string(unsigned char c);
  bool push_hex(unsigned char c);
  bool push_number(unsigned char c, bool& ended);
  bool structural(unsigned char c);  // a byte outside strings, numbers and literals
  // Bytes that end the current string, number or literal (or key) before the containers close.
  int64_t finish_size() const;

  Mode mode_ = Mode::start;
  bool key_ = false;                         // the string is an object key
  int depth_ = 0;                            // open containers
  uint64_t kinds_ = 0;                       // bit d: container d is an object
  uint8_t utf8_left_ = 0;                    // continuation bytes still due in a string
  uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // range of the next continuation byte
  uint8_t hex_left_ = 0;                     // \u digits still due
  uint16_t hex_value_ = 0;                   // the digits so far
  bool want_low_ = false;                    // this \u must be a low surrogate
  const char* literal_ = nullptr;            // the rest of true / false / null
  uint8_t space_run_ = 0;                    // whitespace bytes just before
};

}  // namespace k3::server
