// The merge loop of BPE training on counted words (tokenizer_train.h has the contract).
// Words are sequences of token ids with a frequency; each step merges the pair with the highest
// total count (ties: lower left id, then lower right id) in every word, left to right without
// overlap. Pair counts and the words that hold each pair are kept up to date incrementally.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace k3::train {

struct BpeWords {
  std::vector<std::vector<int32_t>> symbols;  // [words][length] token ids
  std::vector<int64_t> freq;                  // [words]
};

// The 256 single-byte tokens in GPT-2's order (printable bytes first), as K3's table has them.
std::vector<std::string> byte_tokens();

// Merges until `tokens` holds `target` entries or the best pair occurs fewer than
// `min_frequency` times. A merge whose bytes already form a token reuses that id (tiktoken
// tokens are distinct). Appends new tokens; rewrites `words`. Returns the merges performed.
int64_t learn_merges(BpeWords& words, std::vector<std::string>& tokens, int64_t target,
                     int64_t min_frequency,
                     const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace k3::train
