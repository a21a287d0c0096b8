// UTF-8 policy: encode rejects ill-formed input naming the byte offset; decode replaces like
// Python's bytes.decode("utf-8", "replace"); the streaming decoder never splits a character.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "tokenizer/fixture.h"
#include "tokenizer/utf8.h"

namespace k3::test {
namespace {

using tok::find_invalid_utf8;
using tok::utf8_replace_invalid;
constexpr size_t npos = std::string_view::npos;

TEST(Utf8, ValidationFindsFirstIllFormedByte) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), npos);
  EXPECT_EQ(find_invalid_utf8("é中😀\xF4\x8F\xBF\xBF"), npos);  // up to U+10FFFF
  EXPECT_EQ(find_invalid_utf8("ab\xC0\x80"), 2u);              // overlong NUL
  EXPECT_EQ(find_invalid_utf8("a\xE0\x80\x80"), 1u);           // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("\xED\xA0\x80"), 0u);            // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("xyz\xF4\x90\x80\x80"), 3u);     // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xF5\x80\x80\x80"), 0u);
  EXPECT_EQ(find_invalid_utf8("ok\x80"), 2u);      // lone continuation byte
  EXPECT_EQ(find_invalid_utf8("ok\xE4\xB8"), 2u);  // truncated at the end
  EXPECT_EQ(find_invalid_utf8("\xFF"), 0u);
}

TEST(Utf8, EncodeRejectsInvalidUtf8NamingTheOffset) {
  const Tokenizer& tok = fixture_tokenizer();
  try {
    tok.encode("hello \xE4\xB8 world");
    FAIL() << "expected k3::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("byte offset 6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("byte 0xE4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok.encode("\xC0\xAF"), Error);
  EXPECT_THROW(tok.encode("\xED\xB2\x80", false), Error);
  EXPECT_TRUE(tok.encode("").empty());
}

// Expected strings are what Python 3 gives for bytes.decode("utf-8", "replace").
TEST(Utf8, ReplacementMatchesPython) {
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_replace_invalid("a\x80z"), "a" + R + "z");
  EXPECT_EQ(utf8_replace_invalid("\xF0\x9F\x98"), R);  // truncated emoji: one
  EXPECT_EQ(utf8_replace_invalid("\xF0\x9F\x98x"), R + "x");
  EXPECT_EQ(utf8_replace_invalid("a\xED\xA0\x80z"), "a" + R + R + R + "z");  // surrogate: three
  EXPECT_EQ(utf8_replace_invalid("\xE0\x80\xAF"), R + R + R);                // overlong: three
  EXPECT_EQ(utf8_replace_invalid("\xF4\x90\x80\x80"), R + R + R + R);
  EXPECT_EQ(utf8_replace_invalid("\xE4\xB8\xE4\xB8\xAD"), R + "\xE4\xB8\xAD");
  EXPECT_EQ(utf8_replace_invalid("\xC3"), R);
  EXPECT_EQ(utf8_replace_invalid("\xC3\xA9\xFF\xFE"), "\xC3\xA9" + R + R);
  EXPECT_EQ(utf8_replace_invalid("\xC1\xBF"), R + R);
}

TEST(Utf8, StreamEqualsWholeDecodeForAnySplit) {
  std::mt19937 rng(7);
  std::vector<std::string> inputs = {"\xF0\x9F\x98\x80 done", "a\xED\xA0\x80z", "\xE4\xB8",
                                     "\xE4\xB8\xE4\xB8\xAD", "\xC3\xA9\xFF\xFE\xF0\x9F"};
  for (const FixtureCase& fc : fixture_cases()) {
    if (fc.kind == CaseKind::decode) {
      std::string bytes;
      for (int32_t id : fc.ids) bytes += fixture_tokenizer().token_to_piece(id);
      inputs.push_back(bytes);
    }
    if (inputs.size() > 600) break;
  }
  for (const std::string& in : inputs) {
    tok::Utf8Stream stream;
    std::string out;
    for (size_t i = 0; i < in.size();) {
      size_t n = std::min<size_t>(in.size() - i, 1 + rng() % 4);
      std::string part = stream.push(std::string_view(in).substr(i, n));
      EXPECT_EQ(find_invalid_utf8(part), npos);
      out += part;
      i += n;
    }
    out += stream.finish();
    EXPECT_EQ(out, utf8_replace_invalid(in));
  }
}

TEST(StreamDecoder, HoldsSplitCharactersUntilComplete) {
  const Tokenizer& tok = fixture_tokenizer();
  // Rare characters fall back to single-byte tokens, so their bytes arrive one token at a time.
  const std::string text = "ok 🦀🫠 ﾃｽﾄ 𪚥 é€ 👨‍👩‍👧‍👦 end";
  std::vector<int32_t> ids = tok.encode(text);
  StreamDecoder dec(tok);
  std::string out;
  int held = 0;
  for (int32_t id : ids) {
    std::string part = dec.push(id);
    EXPECT_EQ(find_invalid_utf8(part), npos) << "half a character after id " << id;
    if (part.empty()) ++held;
    out += part;
  }
  out += dec.finish();
  EXPECT_EQ(out, text);
  EXPECT_GT(held, 0) << "no character was split across tokens; the test lost its point";
}

TEST(StreamDecoder, FinishReplacesAnIncompleteTail) {
  const Tokenizer& tok = fixture_tokenizer();
  StreamDecoder dec(tok);
  // 0xE4 as a single-byte token: the first byte of a 3-byte character.
  int32_t e4 = -1;
  for (int32_t id = 0; id < tok.vocab_base(); ++id) {
    if (tok.token_to_piece(id) == "\xE4") e4 = id;
  }
  ASSERT_GE(e4, 0);
  EXPECT_EQ(dec.push(tok.encode("a")[0]), "a");
  EXPECT_EQ(dec.push(e4), "");
  EXPECT_EQ(dec.finish(), "\xEF\xBF\xBD");
  EXPECT_THROW(dec.push(tok.n_vocab()), Error);
}

}  // namespace
}  // namespace k3::test
