// The pre-tokenizer's decisions on the points spec §10.3 leaves open (all confirmed against
// tiktoken by the fixture; these pin them down readably).
#include <gtest/gtest.h>

#include "tokenizer/chunks.h"
#include "tokenizer/pretokenize.h"

namespace k3::test {
namespace {

std::vector<std::string> pieces(std::string_view text) {
  std::vector<tok::Span> spans;
  tok::pretokenize(text, spans);
  std::vector<std::string> out;
  for (const tok::Span& s : spans) out.emplace_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

using V = std::vector<std::string>;

TEST(Pretokenize, WordsContractionsAndCase) {
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("HelloWorld ABCdef"), (V{"Hello", "World", " ABCdef"}));
  EXPECT_EQ(pieces("I'LL he's THEY'RE"), (V{"I'LL", " he's", " THEY'RE"}));
  EXPECT_EQ(pieces("it'ſ"), (V{"it'ſ"}));      // (?i) simple case folding: ſ matches s
  EXPECT_EQ(pieces("it’s"), (V{"it", "’s"}));  // U+2019 is not an apostrophe here
  EXPECT_EQ(pieces("ǅemal"), (V{"ǅemal"}));    // Lt is in the upper class
}

TEST(Pretokenize, HanIsTheScriptPropertyNotScriptExtensions) {
  // U+3001 "、" and U+3002 "。" have Script=Common (Han only in Script_Extensions): tiktoken's
  // \p{Han} does not match them, so they are symbols. U+3005 "々" and U+3007 "〇" are Han.
  EXPECT_EQ(pieces("中、文。"), (V{"中", "、", "文", "。"}));
  EXPECT_EQ(pieces("時々〇"), (V{"時々〇"}));
  EXPECT_EQ(pieces("「你好」"), (V{"「", "你好", "」"}));
}

TEST(Pretokenize, DigitsSymbolsAndSpaces) {
  EXPECT_EQ(pieces("1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(pieces("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(pieces("x   "), (V{"x", "   "}));  // whitespace at the end stays whole
  EXPECT_EQ(pieces("a \r\n\r\n b"), (V{"a", " \r\n\r\n", " b"}));
  EXPECT_EQ(pieces(" ...\n\nx"), (V{" ...\n\n", "x"}));
  EXPECT_EQ(pieces("\t\tx"), (V{"\t", "\tx"}));
}

TEST(Chunks, CutsRunsLongerThanTheLimit) {
  std::vector<std::string_view> out;
  tok::split_for_encode("aaaaa  bb", out, 100, 2);
  EXPECT_EQ(out, (std::vector<std::string_view>{"aa", "aa", "a  bb"}));
  out.clear();
  tok::split_for_encode("ééé", out, 2, 100);  // slices count code points, not bytes
  EXPECT_EQ(out, (std::vector<std::string_view>{"éé", "é"}));
  out.clear();
  tok::split_for_encode("\x1c\x1c\x1c", out, 100, 2);  // Python isspace(): U+001C is a space
  EXPECT_EQ(out, (std::vector<std::string_view>{"\x1c\x1c", "\x1c"}));
}

}  // namespace
}  // namespace k3::test
