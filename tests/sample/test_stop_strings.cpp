// Stop strings on decoded text: matched across token boundaries, never emitted, and the text
// before them released exactly once.
#include <gtest/gtest.h>

#include <random>

#include "k3/tokenizer.h"
#include "sample/stop_strings.h"
#include "sample/util.h"

namespace k3 {
namespace {

// Feeds the pieces, returns everything emitted (with finish()).
std::string feed(StopStrings& s, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += s.push(p);
  return out + s.finish();
}

TEST(StopStrings, SplitAcrossPiecesIsFoundAndDropped) {
  StopStrings s({"STOP"});
  EXPECT_EQ(s.push("ab"), "ab");
  EXPECT_EQ(s.push("cS"), "c");  // "S" may start "STOP"
  EXPECT_EQ(s.push("TO"), "");
  EXPECT_FALSE(s.matched());
  EXPECT_EQ(s.push("Pxyz"), "");
  EXPECT_TRUE(s.matched());
  EXPECT_EQ(s.match(), "STOP");
  EXPECT_EQ(s.push("more"), "");
  EXPECT_EQ(s.finish(), "");
}

TEST(StopStrings, HeldTextIsReleasedWhenItCannotMatch) {
  StopStrings s({"STOP"});
  EXPECT_EQ(s.push("xST"), "x");
  EXPECT_EQ(s.push("OX"), "STOX");
  EXPECT_EQ(s.push("ST"), "");
  EXPECT_EQ(s.finish(), "ST");
  EXPECT_FALSE(s.matched());
}

TEST(StopStrings, EarliestOfSeveralAndEmptyIgnored) {
  StopStrings s({"", "world", "o w"});
  EXPECT_EQ(feed(s, {"hell", "o wor", "ld"}), "hell");
  EXPECT_EQ(s.match(), "o w");
  StopStrings none({});
  EXPECT_EQ(feed(none, {"a", "b"}), "ab");
}

TEST(StopStrings, AnySplitGivesTheSameOutput) {
  const std::string text = "The answer is 42.\n\nUser: what? \n\nUser";
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min<size_t>(1 + rng() % 5, text.size() - at);
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    StopStrings s({"\n\nUser:", "zzz"});
    EXPECT_EQ(feed(s, pieces), "The answer is 42.");
    EXPECT_TRUE(s.matched());
    StopStrings t({"User!"});
    EXPECT_EQ(feed(t, pieces), text);
  }
}

TEST(StopStrings, MultiByteCharactersAcrossTokens) {
  // Token by token through the real tokenizer: the stop string starts inside one token and
  // ends inside another, and Chinese characters may be split between tokens.
  const Tokenizer& tok = test::tiny_tokenizer();
  const std::string text = "Hello 你好、世界 and more text";
  const std::vector<int32_t> ids = tok.encode(text);
  ASSERT_GT(ids.size(), 5u);
  StreamDecoder dec(tok);
  StopStrings s({"好、世"});
  std::string out;
  for (int32_t id : ids) {
    out += s.push(dec.push(id));
    if (s.matched()) break;
  }
  EXPECT_TRUE(s.matched());
  EXPECT_EQ(out, "Hello 你");
}

}  // namespace
}  // namespace k3
