// The JSON object prefix recogniser of response_format json_object, against nlohmann's strict
// parser as the reference: every prefix of a valid object text is accepted and closes into an
// object, a byte is refused exactly where the parser reports its error, and the closing text
// is a shortest completion.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>

#include "server/json_prefix.h"

namespace k3::test {
namespace {

using json = nlohmann::json;
using server::JsonPrefix;

std::string random_string(std::mt19937& rng) {
  static const char* const kPieces[] = {"a", "key",  " ", "\"", "\\", "/", "\n", "\t", "\x01",
                                        "é", "日本", "😀", "0",  "{",  "]", ":",  ","};
  std::string s;
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) s += kPieces[rng() % std::size(kPieces)];
  return s;
}

json random_value(std::mt19937& rng, int depth) {
  switch (rng() % (depth < 4 ? 9 : 6)) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng() % 2000) - 1000;
    case 3:
      return std::ldexp(static_cast<double>(static_cast<int32_t>(rng())),
                        -static_cast<int>(rng() % 80));
    case 4:
    case 5:
      return random_string(rng);
    case 6: {
      json a = json::array();
      for (int i = static_cast<int>(rng() % 4); i > 0; --i)
        a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int i = static_cast<int>(rng() % 4); i > 0; --i)
        o[random_string(rng)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

std::string random_object_text(std::mt19937& rng, bool ascii) {
  json o = json::object();
  for (int i = static_cast<int>(rng() % 5); i > 0; --i)
    o[random_string(rng)] = random_value(rng, 1);
  return o.dump(rng() % 2 == 0 ? -1 : 2, ' ', ascii);
}

// Bytes of `s` the recogniser takes before refusing one (s.size() when it takes them all).
size_t accepted(JsonPrefix& p, const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (!p.push(static_cast<unsigned char>(s[i]))) return i;
  return s.size();
}

// The plain reference: a recursive-descent reader of the same language, byte by byte. It
// reports the first byte after which no continuation can give an object (npos: none), and
// whether the object closed (before that byte).
class Reference {
 public:
  struct Verdict {
    size_t refused = std::string::npos;
    bool complete = false;
  };
  static Verdict judge(const std::string& s) {
    Reference r(s);
    Verdict v;
    try {
      r.expect('{');  // no whitespace before the object
      r.object(1);
      v.complete = true;
      if (r.i_ < s.size()) v.refused = r.i_;  // nothing after the object
    } catch (const Refused& e) {
      v.refused = e.at;
    } catch (const Ended&) {
    }
    return v;
  }

 private:
  struct Refused {
    size_t at;
  };
  struct Ended {};
  explicit Reference(const std::string& s) : s_(s) {}
  unsigned char peek() const {
    if (i_ >= s_.size()) throw Ended{};
    return static_cast<unsigned char>(s_[i_]);
  }
  void refuse() const { throw Refused{i_}; }
  void expect(char c) {
    if (peek() != static_cast<unsigned char>(c)) refuse();
    ++i_;
  }
  void space() {  // at most kMaxSpaceRun bytes
    for (int n = 0;
         std::string_view(" \t\n\r").find(static_cast<char>(peek())) != std::string::npos; ++n) {
      if (n == JsonPrefix::kMaxSpaceRun) refuse();
      ++i_;
    }
  }
  void object(int depth) {  // after '{'
    space();
    if (peek() == '}') {
      ++i_;
      return;
    }
    for (;;) {
      space();
      expect('"');
      string();
      space();
      expect(':');
      space();
      value(depth);
      space();
      if (peek() == '}') {
        ++i_;
        return;
      }
      expect(',');
    }
  }
  void array(int depth) {  // after '['
    space();
    if (peek() == ']') {
      ++i_;
      return;
    }
    for (;;) {
      space();
      value(depth);
      space();
      if (peek() == ']') {
        ++i_;
        return;
      }
      expect(',');
    }
  }
  void value(int depth) {
    const unsigned char c = peek();
    if (c == '{' || c == '[') {
      if (depth >= JsonPrefix::kMaxDepth) refuse();
      ++i_;
      if (c == '{') {
        object(depth + 1);
      } else {
        array(depth + 1);
      }
    } else if (c == '"') {
      ++i_;
      string();
    } else if (c == 't' || c == 'f' || c == 'n') {
      const std::string word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      for (char w : word) expect(w);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      number();
    } else {
      refuse();
    }
  }
  bool digit() const { return peek() >= '0' && peek() <= '9'; }
  void digits() {  // one or more
    if (!digit()) refuse();
    while (digit()) ++i_;
  }
  // A number is never last in an object text (a closer must follow), so peek() may end it.
  void number() {
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else {
      digits();
    }
    if (peek() == '.') {
      ++i_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      digits();
    }
  }
  void string() {  // after the opening quote
    for (;;) {
      const unsigned char c = peek();
      if (c == '"') {
        ++i_;
        return;
      }
      if (c == '\\') {
        ++i_;
        escape();
      } else if (c < 0x20) {
        refuse();
      } else if (c < 0x80) {
        ++i_;
      } else {
        utf8();
      }
    }
  }
  // Unicode's table of well-formed UTF-8 (3-7): per lead byte, the range of the second byte.
  void utf8() {
    const unsigned char c = peek();
    int more = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      more = 1;
    } else if (c == 0xE0) {
      more = 2, lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      more = 2;
    } else if (c == 0xED) {
      more = 2, hi = 0x9F;
    } else if (c == 0xF0) {
      more = 3, lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
      more = 3;
    } else if (c == 0xF4) {
      more = 3, hi = 0x8F;
    } else {
      refuse();
    }
    ++i_;
    for (int k = 0; k < more; ++k) {
      const unsigned char b = peek();
      if (b < (k == 0 ? lo : 0x80) || b > (k == 0 ? hi : 0xBF)) refuse();
      ++i_;
    }
  }
  void escape() {  // after a backslash
    const unsigned char c = peek();
    if (std::string_view("\"\\/bfnrt").find(static_cast<char>(c)) != std::string::npos) {
      ++i_;
      return;
    }
    expect('u');
    const unsigned v = hex4(false);
    if (v >= 0xD800 && v <= 0xDBFF) {  // a low surrogate escape must follow
      expect('\\');
      expect('u');
      hex4(true);
    }
  }
  // Four hex digits; each is refused once no value it could still lead to is allowed (a low
  // surrogate when `low`, anything but one otherwise), tried value by value.
  unsigned hex4(bool low) {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const unsigned char c = peek();
      if (!std::isxdigit(c)) refuse();
      v = v * 16 + static_cast<unsigned>(std::isdigit(c) ? c - '0' : std::tolower(c) - 'a' + 10);
      const unsigned span = 1u << (4 * (3 - k));
      bool possible = false;
      for (unsigned rest = 0; rest < span && !possible; ++rest) {
        const unsigned u = v * span + rest;
        possible = low == (u >= 0xDC00 && u <= 0xDFFF);
      }
      if (!possible) refuse();
      ++i_;
    }
    return v;
  }

  const std::string& s_;
  size_t i_ = 0;
};

// JSON text (by nlohmann's grammar check: numbers past double's range are valid JSON, which
// json::parse refuses) whose value is an object.
bool parses_as_object(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\n\r");
  return json::accept(s) && first != std::string::npos && s[first] == '{';
}

TEST(JsonPrefix, EveryPrefixOfAnObjectIsAcceptedAndCloses) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_object_text(rng, trial % 2 == 0);
    JsonPrefix p;
    for (size_t i = 0; i <= text.size(); ++i) {
      const std::string closing = p.closing();
      ASSERT_EQ(p.closing_size(), static_cast<int64_t>(closing.size())) << text.substr(0, i);
      ASSERT_TRUE(parses_as_object(text.substr(0, i) + closing))
          << "prefix [" << text.substr(0, i) << "] + closing [" << closing << "]";
      ASSERT_EQ(p.complete(), i == text.size()) << text.substr(0, i);
      // The closing text, pushed byte by byte, is accepted and shortens what is left by one.
      JsonPrefix q = p;
      for (size_t k = 0; k < closing.size(); ++k) {
        ASSERT_TRUE(q.push(static_cast<unsigned char>(closing[k]))) << text.substr(0, i);
        ASSERT_EQ(q.closing_size(), static_cast<int64_t>(closing.size() - k - 1));
      }
      EXPECT_TRUE(q.complete());
      if (i < text.size()) {
        ASSERT_TRUE(p.push(static_cast<unsigned char>(text[i]))) << text.substr(0, i + 1);
      }
    }
    EXPECT_TRUE(p.closing().empty());
    EXPECT_FALSE(p.push(' '));  // nothing after the object, not even whitespace
  }
}

// One random edit: a byte inserted, replaced or removed.
std::string mutate(std::string s, std::mt19937& rng) {
  static const std::string kBytes =
      "{}[]:,\"\\ 0123456789-+.eEtrufalsn\x01\x7f\xc3\xa9\xe6\xf0\x80\xff";
  const size_t at = rng() % (s.size() + 1);
  const char b = kBytes[rng() % kBytes.size()];
  switch (rng() % 3) {
    case 0:
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), b);
      break;
    case 1:
      if (at < s.size()) s[at] = b;
      break;
    default:
      if (at < s.size()) s.erase(at, 1);
  }
  return s;
}

// Edited object texts (\u escapes included): the recogniser refuses the byte the reference
// refuses, and never a byte later than where nlohmann's parser reports its error (which is at
// the end of the offending token); what it took closes into an object.
TEST(JsonPrefix, RefusesTheByteTheReferenceRefuses) {
  std::mt19937 rng(12);
  int refused = 0, open = 0, whole = 0;
  for (int trial = 0; trial < 6000; ++trial) {
    std::string s = mutate(random_object_text(rng, trial % 3 == 0), rng);
    if (trial % 5 == 0) s = mutate(s, rng);
    // An edit can join digits into a huge exponent: valid JSON, but past double's range, which
    // nlohmann (the closing check below) refuses.
    static const std::regex kHugeExponent("[eE][-+]?[0-9]{3}");
    if (std::regex_search(s, kHugeExponent)) continue;
    JsonPrefix p;
    const size_t took = accepted(p, s);
    const Reference::Verdict ref = Reference::judge(s);
    ASSERT_EQ(took, ref.refused == std::string::npos ? s.size() : ref.refused) << s;
    ASSERT_EQ(p.complete(), ref.complete) << s;
    ASSERT_TRUE(parses_as_object(s.substr(0, took) + p.closing())) << s;
    if (ref.refused != std::string::npos) ++refused;
    if (ref.refused == std::string::npos) ++(ref.complete ? whole : open);
    const size_t first = s.find_first_not_of(" \t\n\r");
    if (first == std::string::npos || s[first] != '{') continue;  // nlohmann takes any value
    if (json::accept(s)) {
      // A whole object; nlohmann takes whitespace around it, the recogniser refuses it.
      EXPECT_EQ(p.complete(), first == 0) << s;
      continue;
    }
    try {
      (void)json::parse(s).is_null();
    } catch (const json::parse_error& e) {
      EXPECT_LE(took, e.byte - 1) << s << "\n" << e.what();
    }
  }
  EXPECT_GT(refused, 1000);  // the edits reach every outcome
  EXPECT_GT(open, 200);
  EXPECT_GT(whole, 200);
}

TEST(JsonPrefix, StrictCases) {
  struct Case {
    std::string text;
    size_t took;  // bytes accepted
  };
  const Case cases[] = {
      {"[1]", 0},                              // the top level must be an object
      {" \n{}", 0},                            // no whitespace before the object
      {"{" + std::string(20, ' ') + "}", 22},  // 20 spaces in a row at most
      {"{" + std::string(21, ' ') + "}", 21},
      {"{}x", 2},                           // nothing after the object
      {"{\"a\":01", 6},                     // no leading zeros
      {"{\"a\":-}", 6},                     // a minus needs a digit
      {"{\"a\":1.}", 7},                    // so does a dot
      {"{\"a\":1e+}", 8},                   // and an exponent
      {"{\"a\":tru}", 8},                   // literals are spelled out
      {"{\"a\":\"\x1f\"}", 6},              // no raw control bytes in strings
      {"{\"a\":\"\xc0\x80\"}", 6},          // no overlong UTF-8
      {"{\"a\":\"\xed\xa0\x80\"}", 7},      // no UTF-8 surrogates
      {"{\"a\":\"\xf4\x90\x80\x80\"}", 7},  // nothing above U+10FFFF
      {"{\"a\":\"\xe6\x97\"}", 8},          // a cut multi-byte character
      {"{\"a\":\"\\udc00\"}", 9},           // a low surrogate escape alone: refused at 'c'
      {"{\"a\":\"\\ud800x\"}", 12},         // a high one must be followed by a low one
      {"{\"a\":\"\\ud800\\u0041\"}", 14},   // ... a low one
      {"{\"a\":\"\\ud83d\\ude00\"}", 20},   // a pair is fine
      {"{\"a\":\"\\x\"}", 7},               // unknown escape
      {"{\"a\" 1}", 5},                     // a colon after a key
      {"{\"a\":1,}", 7},                    // no trailing comma
      {"{\"a\":[1,]}", 8},                  // nor in arrays
      {"{\"a\":[1}", 7},                    // closers must match
      {"{1:2}", 1},                         // keys are strings
  };
  for (const Case& c : cases) {
    JsonPrefix p;
    EXPECT_EQ(accepted(p, c.text), c.took) << c.text;
  }
  JsonPrefix deep;
  EXPECT_TRUE(deep.push('{') && deep.push('"') && deep.push('"') && deep.push(':'));
  for (int d = 1; d < JsonPrefix::kMaxDepth; ++d) EXPECT_TRUE(deep.push('[')) << d;
  EXPECT_FALSE(deep.push('['));                           // kMaxDepth containers at most
  EXPECT_EQ(deep.closing_size(), JsonPrefix::kMaxDepth);  // every closer
}

// Every prefix state reached by the random texts whose closing is at most 3 bytes: no 1- or
// 2-byte continuation (any bytes) completes it sooner.
TEST(JsonPrefix, ClosingIsShortest) {
  std::mt19937 rng(13);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const std::string text = random_object_text(rng, trial % 2 == 0);
    JsonPrefix p;
    for (size_t i = 0; i < text.size(); ++i) {
      const int64_t n = p.closing_size();
      if (n >= 2 && n <= 3) {
        ++checked;
        for (int a = 0; a < 256; ++a) {
          JsonPrefix q = p;
          if (!q.push(static_cast<unsigned char>(a))) continue;
          ASSERT_FALSE(q.complete()) << text.substr(0, i) << " + " << a;
          if (n < 3) continue;
          for (int b = 0; b < 256; ++b) {
            JsonPrefix r = q;
            ASSERT_FALSE(r.push(static_cast<unsigned char>(b)) && r.complete())
                << text.substr(0, i) << " + " << a << " " << b;
          }
        }
      }
      ASSERT_TRUE(p.push(static_cast<unsigned char>(text[i])));
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace k3::test
