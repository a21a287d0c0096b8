// Special tokens: ids by name, allowed vs disallowed, reserved names, the EOS pair, and (when a
// real K3 tokenizer is at hand) the goldens of spec §10.4.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "tokenizer/fixture.h"

namespace k3::test {
namespace {

TEST(Specials, IdsByName) {
  const Tokenizer& tok = fixture_tokenizer();
  const int32_t base = tok.vocab_base();
  const SpecialIds& ids = tok.special_ids();
  EXPECT_EQ(ids.bos, base + 0);         // [BOS]
  EXPECT_EQ(ids.config_eos, base + 1);  // [EOS]
  EXPECT_EQ(ids.eos, base + 2);         // <|end_of_msg|>
  EXPECT_EQ(ids.unk, base + 254);
  EXPECT_EQ(ids.pad, base + 255);
  EXPECT_EQ(tok.stop_ids(), (std::vector<int32_t>{base + 2, base + 1}));
  EXPECT_EQ(tok.special_id("<|open|>"), base + 3);
  EXPECT_EQ(tok.special_id("<osagent_mode>"), base + 65);
  EXPECT_EQ(tok.special_id("<|reserved_token_" + std::to_string(base + 8) + "|>"), base + 8);
  EXPECT_EQ(tok.special_id("<|reserved_token_0|>"), -1);
  EXPECT_EQ(tok.special_id("hello"), -1);
  EXPECT_EQ(tok.token_to_piece(base + 2), "<|end_of_msg|>");
  EXPECT_EQ(tok.token_to_piece(base + 10), "<|reserved_token_" + std::to_string(base + 10) + "|>");
}

TEST(Specials, RangeAndFlags) {
  const Tokenizer& tok = fixture_tokenizer();
  const int32_t base = tok.vocab_base();
  EXPECT_FALSE(tok.is_special(base - 1));
  EXPECT_TRUE(tok.is_special(base));
  EXPECT_TRUE(tok.is_special(base + 255));
  EXPECT_FALSE(tok.is_special(base + 256));
  EXPECT_FALSE(tok.is_special(-1));
  EXPECT_TRUE(tok.is_skippable_special(base + 2));
  for (int off : {3, 4, 5}) EXPECT_FALSE(tok.is_skippable_special(base + off)) << off;
  EXPECT_TRUE(tok.is_skippable_special(base + 100));  // reserved
  EXPECT_THROW(tok.token_to_piece(base + 256), Error);
  EXPECT_THROW(tok.token_to_piece(-1), Error);
  std::vector<int32_t> bad = {1, base + 256};
  EXPECT_THROW(tok.decode(bad), Error);
}

TEST(Specials, AllowedBecomeIdsDisallowedAreText) {
  const Tokenizer& tok = fixture_tokenizer();
  const int32_t base = tok.vocab_base();
  const std::string text = "[BOS]Hi<|end_of_msg|><|open|>x<|reserved_token_" +
                           std::to_string(base + 8) + "|>[[EOS]]<|end_of_msg|";
  std::vector<int32_t> with = tok.encode(text, true);
  std::vector<int32_t> specials;
  for (int32_t id : with) {
    if (tok.is_special(id)) specials.push_back(id);
  }
  EXPECT_EQ(specials, (std::vector<int32_t>{base + 0, base + 2, base + 3, base + 8, base + 1}));
  EXPECT_EQ(with.front(), base + 0);
  std::vector<int32_t> without = tok.encode(text, false);
  for (int32_t id : without) EXPECT_FALSE(tok.is_special(id)) << id;
  EXPECT_EQ(tok.decode(with), text);
  EXPECT_EQ(tok.decode(without), text);
  // A special is a pre-token boundary: the text before it is encoded on its own.
  std::vector<int32_t> a = tok.encode("hello ", true), b = tok.encode("hello [EOS]", true);
  a.push_back(base + 1);
  EXPECT_EQ(a, b);
}

// Goldens of spec §10.4 from the real K3 tokenizer; runs only when K3_TOKENIZER_DIR names a
// directory holding K3's tiktoken.model and tokenizer_config.json.
TEST(Specials, RealK3Goldens) {
  const char* dir = std::getenv("K3_TOKENIZER_DIR");
  if (!dir || !*dir) GTEST_SKIP() << "set K3_TOKENIZER_DIR to a K3 model directory to run";
  Tokenizer tok = Tokenizer::load(dir);
  EXPECT_EQ(tok.vocab_base(), 163584);
  EXPECT_EQ(tok.n_vocab(), 163840);
  EXPECT_EQ(tok.special_ids().eos, 163586);
  EXPECT_EQ(tok.special_ids().config_eos, 163585);
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{19180, 2695}));
  EXPECT_EQ(tok.encode("你好世界"), (std::vector<int32_t>{33845, 2243}));
  EXPECT_EQ(tok.encode("The capital of France is"),
            (std::vector<int32_t>{1008, 10484, 318, 15383, 387}));
}

}  // namespace
}  // namespace k3::test
