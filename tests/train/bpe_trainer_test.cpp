// BPE training: the incremental merge loop against a recount-every-merge reference, and the
// written tokenizer loaded by k3::Tokenizer, round-tripping random and real text.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "common/cli_harness.h"
#include "k3/error.h"
#include "k3/tokenizer.h"
#include "k3/tokenizer_train.h"
#include "train/bpe_merges.h"

namespace k3 {
namespace {

using train::BpeWords;

BpeTrainOptions vocab(int64_t n) {
  BpeTrainOptions o;
  o.vocab_size = n;
  return o;
}

// The plain reference: recount every pair before each merge.
std::vector<std::string> reference_merges(BpeWords w, std::vector<std::string> tokens,
                                          int64_t target, int64_t min_frequency) {
  while (static_cast<int64_t>(tokens.size()) < target) {
    std::map<std::pair<int32_t, int32_t>, int64_t> count;
    for (size_t i = 0; i < w.symbols.size(); ++i)
      for (size_t j = 0; j + 1 < w.symbols[i].size(); ++j)
        count[{w.symbols[i][j], w.symbols[i][j + 1]}] += w.freq[i];
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 0;
    for (const auto& [p, c] : count) {  // ascending pairs: the first maximum wins ties
      if (c > best_count) {
        best = p;
        best_count = c;
      }
    }
    if (best_count < min_frequency) break;
    const std::string bytes = tokens[size_t(best.first)] + tokens[size_t(best.second)];
    auto it = std::find(tokens.begin(), tokens.end(), bytes);
    const auto id = static_cast<int32_t>(it - tokens.begin());
    if (it == tokens.end()) tokens.push_back(bytes);
    for (std::vector<int32_t>& s : w.symbols) {
      std::vector<int32_t> out;
      for (size_t j = 0; j < s.size(); ++j) {
        if (j + 1 < s.size() && s[j] == best.first && s[j + 1] == best.second) {
          out.push_back(id);
          ++j;
        } else {
          out.push_back(s[j]);
        }
      }
      s = out;
    }
  }
  return tokens;
}

BpeWords random_words(std::mt19937_64& gen, int n_words, int alphabet) {
  BpeWords w;
  std::uniform_int_distribution<int> len(1, 12), sym(0, alphabet - 1), freq(1, 9), coin(0, 3);
  for (int i = 0; i < n_words; ++i) {
    std::vector<int32_t> s;
    const int n = len(gen);
    for (int j = 0; j < n; ++j) {
      // Runs of one symbol exercise overlapping pairs ("aaaa").
      s.push_back(coin(gen) == 0 && !s.empty() ? s.back() : sym(gen));
    }
    w.symbols.push_back(s);
    w.freq.push_back(freq(gen));
  }
  return w;
}

TEST(BpeTrain, IncrementalMergesEqualTheReference) {
  std::mt19937_64 gen(42);
  for (int trial = 0; trial < 30; ++trial) {
    const int alphabet = 2 + trial % 6;
    BpeWords w = random_words(gen, 1 + trial * 7, alphabet);
    std::vector<std::string> base;
    for (int i = 0; i < alphabet; ++i) base.push_back(std::string(1, char('a' + i)));
    for (int64_t minf : {1, 2, 5}) {
      const int64_t target = alphabet + 40;
      std::vector<std::string> want = reference_merges(w, base, target, minf);
      BpeWords copy = w;
      std::vector<std::string> got = base;
      train::learn_merges(copy, got, target, minf);
      EXPECT_EQ(got, want) << "trial " << trial << " min frequency " << minf;
    }
  }
}

TEST(BpeTrain, ReusesATokenMadeTwoWays) {
  // "abc" first comes from (ab, c) in one word and then from (a, bc) in another: one token.
  BpeWords w{{{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {1, 2}, {1, 2}, {1, 2}, {1, 2}, {0, 1, 2}},
             {1, 1, 1, 1, 1, 1, 1, 1}};
  w.symbols.push_back({0, 1});
  w.freq.push_back(9);  // makes "ab" first
  std::vector<std::string> tokens = {"a", "b", "c"};
  BpeWords copy = w;
  train::learn_merges(copy, tokens, 10, 1);
  EXPECT_EQ(tokens, reference_merges(w, {"a", "b", "c"}, 10, 1));
  std::set<std::string> distinct(tokens.begin(), tokens.end());
  EXPECT_EQ(distinct.size(), tokens.size());
}

TEST(BpeTrain, ByteTokensAreEveryByteOnce) {
  std::vector<std::string> b = train::byte_tokens();
  ASSERT_EQ(b.size(), 256u);
  EXPECT_EQ(b[0], "!");
  std::set<std::string> distinct(b.begin(), b.end());
  EXPECT_EQ(distinct.size(), 256u);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Real English: the project's own docs.
std::string real_text() {
  std::string t;
  for (const char* f : {"/README.md", "/docs/ARCHITECTURE.md", "/docs/cost.md", "/docs/MODEL.md"})
    t += read_file(std::string(K3_SOURCE_DIR) + f);
  return t;
}

// Random valid UTF-8 from a mix of scripts, spaces, line ends, digits and punctuation.
std::string random_text(std::mt19937_64& gen, int n_chars) {
  static const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0x20, 0x7e},     {0x09, 0x0d},       {0x30, 0x39},     {0xa0, 0x24f},
      {0x391, 0x3c9},   {0x410, 0x44f},     {0x3000, 0x303f}, {0x4e00, 0x4fff},
      {0xac00, 0xac40}, {0x1f600, 0x1f64f}, {0x2000, 0x206f}};
  std::uniform_int_distribution<size_t> pick(0, ranges.size() - 1);
  std::string s;
  for (int i = 0; i < n_chars; ++i) {
    const auto [lo, hi] = ranges[pick(gen)];
    const uint32_t cp = std::uniform_int_distribution<uint32_t>(lo, hi)(gen);
    if (cp < 0x80) {
      s += char(cp);
    } else if (cp < 0x800) {
      s += char(0xc0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      s += char(0xe0 | (cp >> 12));
      s += char(0x80 | ((cp >> 6) & 0x3f));
      s += char(0x80 | (cp & 0x3f));
    } else {
      s += char(0xf0 | (cp >> 18));
      s += char(0x80 | ((cp >> 12) & 0x3f));
      s += char(0x80 | ((cp >> 6) & 0x3f));
      s += char(0x80 | (cp & 0x3f));
    }
  }
  return s;
}

class TrainedTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    BpeTrainer t;
    const std::string text = real_text();
    t.add_text(text);
    std::mt19937_64 gen(7);
    t.add_text(random_text(gen, 2000));
    stats_ = t.train(vocab(1536));
    t.write(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }
  static test::TempDir* dir_;
  static BpeTrainStats stats_;
};
test::TempDir* TrainedTokenizer::dir_ = nullptr;
BpeTrainStats TrainedTokenizer::stats_;

TEST_F(TrainedTokenizer, LoadsWithK3Specials) {
  Tokenizer tok = Tokenizer::load(dir_->path());
  EXPECT_EQ(stats_.vocab_size, 1536);
  EXPECT_EQ(tok.n_vocab(), 1536);
  EXPECT_EQ(tok.vocab_base(), 1280);
  EXPECT_EQ(tok.special_id("[BOS]"), 1280);
  EXPECT_EQ(tok.special_id("<|end_of_msg|>"), 1282);
  EXPECT_EQ(tok.special_id("[PAD]"), 1535);
  EXPECT_EQ(tok.special_id("<|reserved_token_1290|>"), 1290);
  EXPECT_FALSE(tok.is_skippable_special(1283));  // <|open|>
  EXPECT_TRUE(tok.is_skippable_special(1282));
  EXPECT_EQ(tok.special_ids().eos, 1282);
  // The config mirrors the K3 fixture's, ids shifted to this vocabulary.
  nlohmann::json ours = nlohmann::json::parse(read_file(dir_->path() + "/tokenizer_config.json"));
  nlohmann::json theirs =
      nlohmann::json::parse(read_file(K3_SOURCE_DIR "/tests/data/tokenizer/tokenizer_config.json"));
  nlohmann::json shifted = theirs;
  shifted["added_tokens_decoder"] = nlohmann::json::object();
  for (const auto& [id, v] : theirs["added_tokens_decoder"].items())
    shifted["added_tokens_decoder"][std::to_string(std::stoi(id) - 6260 + 1280)] = v;
  EXPECT_EQ(ours, shifted);
}

TEST_F(TrainedTokenizer, RoundTripsRandomAndRealText) {
  Tokenizer tok = Tokenizer::load(dir_->path());
  std::mt19937_64 gen(99);
  for (int i = 0; i < 300; ++i) {
    const std::string s = random_text(gen, 1 + i % 97);
    EXPECT_EQ(tok.decode(tok.encode(s, false)), s);
    EXPECT_EQ(tok.decode(tok.encode(s, true)), s);
  }
  const std::string real = real_text();
  const std::vector<int32_t> ids = tok.encode(real, false);
  EXPECT_EQ(tok.decode(ids), real);
  // Trained on this text, the vocabulary compresses it (bytes would be 1 token per byte).
  EXPECT_LT(static_cast<double>(ids.size()), 0.4 * static_cast<double>(real.size()));
  // Rank-BPE reproduces the learned merges on the training words, up to rare differences.
  EXPECT_LT(static_cast<double>(ids.size()), 1.02 * static_cast<double>(stats_.corpus_tokens));
}

TEST_F(TrainedTokenizer, EveryByteStringHasTokens) {
  // Any bytes (also ill-formed UTF-8) are a sequence of byte tokens whose pieces concatenate
  // back to them; decode agrees whenever the bytes are valid UTF-8.
  Tokenizer tok = Tokenizer::load(dir_->path());
  std::vector<int32_t> rank_of(256, -1);
  for (int32_t id = 0; id < tok.vocab_base(); ++id) {
    std::string_view p = tok.token_to_piece(id);
    if (p.size() == 1) rank_of[static_cast<unsigned char>(p[0])] = id;
  }
  for (int b = 0; b < 256; ++b) ASSERT_GE(rank_of[size_t(b)], 0) << b;
  std::mt19937_64 gen(5);
  std::uniform_int_distribution<int> byte(0, 255), len(0, 64);
  for (int i = 0; i < 500; ++i) {
    std::string s(size_t(len(gen)), '\0');
    for (char& c : s) c = static_cast<char>(byte(gen));
    std::vector<int32_t> ids;
    std::string back;
    for (char c : s) {
      ids.push_back(rank_of[static_cast<unsigned char>(c)]);
      back += tok.token_to_piece(ids.back());
    }
    EXPECT_EQ(back, s);
    if (find_invalid_utf8(s) == std::string_view::npos) {
      EXPECT_EQ(tok.decode(ids), s);
      EXPECT_EQ(tok.decode(tok.encode(s, false)), s);
    }
  }
}

TEST(BpeTrain, SkipsIllFormedBytesAndRejectsBadUse) {
  BpeTrainer t;
  t.add_text(
      "ab\xff"
      "ab\xc0\xaf ab ab");
  EXPECT_THROW(t.train(vocab(511)), Error);
  BpeTrainStats st = t.train(vocab(513));  // one merge above the bytes
  EXPECT_EQ(st.invalid_bytes, 3);
  EXPECT_EQ(st.bytes, 13);
  ASSERT_EQ(t.tokens().size(), 257u);
  EXPECT_EQ(t.tokens()[256], "ab");  // 4 times: the most frequent pair
  EXPECT_THROW(t.train(vocab(512)), Error);
  EXPECT_THROW(t.add_text("more"), Error);
  BpeTrainer empty;
  EXPECT_THROW(empty.write("/tmp/never"), Error);
}

TEST(BpeTrain, LongRunsAreCutAsEncodeCutsThem) {
  // 60,000 spaces: encode cuts the run at 25,000 characters, so training never sees a longer
  // piece, and the 256 + 1 tokens learned from it are runs of spaces.
  BpeTrainer t;
  t.add_text(std::string(60000, ' ') + "x");
  BpeTrainStats st = t.train(vocab(512 + 12));
  EXPECT_GE(st.pretokens, 3);
  for (size_t r = 256; r < t.tokens().size(); ++r) {
    EXPECT_EQ(t.tokens()[r], std::string(t.tokens()[r].size(), ' '));
    EXPECT_LE(t.tokens()[r].size(), 25000u);
  }
}

TEST(BpeTrainCli, TrainThenTokenizeRoundTrip) {
  test::TempDir dir;
  dir.write("a.txt", real_text());
  dir.write("b.txt", "It's the end of the line.\nNumbers 12345 and 日本語.\n");
  const std::string out = dir.path() + "/tok";
  test::CliResult r = test::run_k3({"tokenizer", "train", "-i", dir.path() + "/a.txt", "-i",
                                    dir.path() + "/b.txt", "-o", out, "--vocab-size", "1000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("vocab_size 1000"), std::string::npos) << r.out;
  const std::string text = "Numbers 12345 and 日本語 <|end_of_msg|>";
  r = test::run_k3({"tokenize", "-m", out, "--json", "-p", text});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  test::CliResult back = test::run_k3({"detokenize", "-m", out}, r.out);
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(back.out, text);
  EXPECT_NE(r.out.find("746"), std::string::npos);  // <|end_of_msg|> = 744 ranks + 2
}

TEST(BpeTrainCli, CleanErrors) {
  test::TempDir dir;
  dir.write("a.txt", "some text");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"tokenizer", "train", "-o", dir.path() + "/o"},
           {"tokenizer", "train", "-i", "/nonexistent/x", "-o", dir.path() + "/o"},
           {"tokenizer", "train", "-i", dir.path() + "/a.txt"},
           {"tokenizer", "train", "-i", dir.path() + "/a.txt", "-o", "x", "--vocab-size", "100"},
           {"tokenizer", "train", "-i", dir.path() + "/a.txt", "-o", "/proc/nope/x"},
           {"tokenizer", "frobnicate"}}) {
    test::CliResult r = test::run_k3(args);
    EXPECT_EQ(r.exit_code, 1) << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace k3
