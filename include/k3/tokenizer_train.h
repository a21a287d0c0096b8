// Training a byte-level BPE tokenizer in K3's format (`k3 tokenizer train`): text is cut by K3's
// pre-tokenizer (spec §10.3), pre-tokens are counted, and the most frequent adjacent pair of
// tokens is merged until the vocabulary is full. The output is what Tokenizer::load reads:
// tiktoken.model (rank = id, the 256 single bytes first, then merges in the order learned) and
// tokenizer_config.json with K3's 256 special tokens at ids [ranks, ranks + 256).
//
//   k3::BpeTrainer t;
//   t.add_text(corpus_chunk);              // repeatedly; any bytes (ill-formed UTF-8 is skipped)
//   k3::BpeTrainOptions o;
//   o.vocab_size = 8192;                   // counts the 256 specials
//   t.train(o);
//   t.write("models/mine");                // then k3::Tokenizer::load("models/mine")
//
// Merges are exact greedy BPE: each step takes the pair with the highest count over all words
// (ties: the lower left id, then the lower right id). Pair counts are kept incrementally, so a
// merge costs the words that contain the pair, not the corpus.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace k3 {

struct BpeTrainOptions {
  int64_t vocab_size = 8192;  // ids in all: ranks + 256 specials (config.json vocab_size)
  int64_t min_frequency = 2;  // stop early when the best pair occurs fewer times
  // Called now and then with (ranks so far, ranks wanted); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct BpeTrainStats {
  int64_t bytes = 0;          // text bytes seen
  int64_t invalid_bytes = 0;  // bytes skipped as ill-formed UTF-8
  int64_t pretokens = 0;      // pre-tokens counted
  int64_t unique_words = 0;   // distinct pre-tokens
  int64_t merges = 0;         // merges performed (a merge that re-creates a token adds no rank)
  int64_t ranks = 0;          // lines of tiktoken.model
  int64_t vocab_size = 0;     // ranks + 256
  int64_t corpus_tokens = 0;  // the counted text's length in tokens after training
};

class BpeTrainer {
 public:
  BpeTrainer();
  ~BpeTrainer();
  BpeTrainer(BpeTrainer&&) noexcept;
  BpeTrainer& operator=(BpeTrainer&&) noexcept;

  // Counts the pre-tokens of `text`. Ill-formed UTF-8 bytes are skipped (and counted); they
  // also end the pre-token before them. Cutting a corpus at line ends changes almost nothing.
  void add_text(std::string_view text);
  // Learns the merges; call once, after all text. Throws k3::Error on a bad vocab_size.
  BpeTrainStats train(const BpeTrainOptions& options);
  // The token bytes in rank order (after train()).
  const std::vector<std::string>& tokens() const;
  // Writes DIR/tiktoken.model and DIR/tokenizer_config.json (each through a temporary file and
  // a rename); creates DIR if needed.
  void write(const std::string& dir) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3
