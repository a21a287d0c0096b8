// Rank-BPE: the tiktoken-style linear merge (the reference) and the heap merge used for long
// pieces agree; ties go to the leftmost pair; a piece that is itself a token is one id.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/bpe.h"
#include "tokenizer/fixture.h"

namespace k3::test {
namespace {

using tok::RankTable;

RankTable tiny_table(const std::vector<std::string>& merges) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  tokens.insert(tokens.end(), merges.begin(), merges.end());
  return RankTable(tokens);
}

std::vector<int32_t> linear(const RankTable& t, std::string_view s) {
  std::vector<int32_t> out;
  tok::bpe_merge_linear(t, s, out);
  return out;
}

std::vector<int32_t> heap(const RankTable& t, std::string_view s) {
  std::vector<int32_t> out;
  tok::bpe_merge_heap(t, s, out);
  return out;
}

TEST(Bpe, LowestRankFirstLeftmostOnTies) {
  RankTable t = tiny_table({"aa", "ab", "bc", "abc"});  // ranks 256..259
  EXPECT_EQ(linear(t, "aaa"), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(linear(t, "aaaa"), (std::vector<int32_t>{256, 256}));
  // "ab" (257) beats "bc" (258), then "ab"+"c" = "abc" (259).
  EXPECT_EQ(linear(t, "abc"), (std::vector<int32_t>{259}));
  EXPECT_EQ(linear(t, "xbc"), (std::vector<int32_t>{'x', 258}));
  for (const char* s : {"aaa", "aaaa", "abc", "xbc", "aabcabcaa", "cba"}) {
    EXPECT_EQ(heap(t, s), linear(t, s)) << s;
  }
}

TEST(Bpe, WholePieceTokenWinsEvenWhenMergesCannotReachIt) {
  const Tokenizer& tok = fixture_tokenizer();
  int32_t id = tok.vocab_base() - 1;  // the fixture's last ranks are unreachable whole words
  std::string piece(tok.token_to_piece(id));
  EXPECT_EQ(tok.encode(piece), (std::vector<int32_t>{id})) << piece;
}

TEST(Bpe, HeapEqualsLinearOnRandomPieces) {
  // Build a RankTable from the fixture's tokens and compare the two merges on slices of text.
  const Tokenizer& tok = fixture_tokenizer();
  std::vector<std::string> tokens;
  for (int32_t id = 0; id < tok.vocab_base(); ++id) tokens.emplace_back(tok.token_to_piece(id));
  RankTable table(tokens);
  std::mt19937 rng(1);
  int compared = 0;
  for (const FixtureCase& fc : fixture_cases()) {
    if (fc.kind == CaseKind::decode || fc.text.size() < 600) continue;
    for (int k = 0; k < 3; ++k) {
      size_t len = 1 + rng() % 500, at = rng() % (fc.text.size() - len);
      std::string_view s = std::string_view(fc.text).substr(at, len);
      ASSERT_EQ(heap(table, s), linear(table, s)) << "slice at " << at << " of " << len;
      ++compared;
    }
    if (compared > 3000) break;
  }
  EXPECT_GT(compared, 1000);
}

}  // namespace
}  // namespace k3::test
