// Pre-tokenised text (.k3tok): the ids of one text as `k3 train --data` reads them, so a large
// corpus is tokenised once. Layout (little-endian): the 8 bytes "K3TOK\x01\0\0", the
// tokenizer's id count (uint32), 4 zero bytes, the tokenizer's fingerprint (uint64), the id
// count (uint64), then the ids (uint32 each).
//
//   k3::write_token_file("train.k3tok", tok, tok.encode(text, false));
//   std::vector<int32_t> ids = k3::read_token_file("train.k3tok", tok);
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "k3/tokenizer.h"

namespace k3 {

// A hash of every token's bytes in id order (specials included): two tokenizers with the same
// fingerprint give the same ids for every text.
uint64_t tokenizer_fingerprint(const Tokenizer& tok);

// Writes `ids` (each in [0, tok.n_vocab())) to `path` atomically (a temporary file renamed).
// Throws k3::Error naming the path or the first bad id.
void write_token_file(const std::string& path, const Tokenizer& tok, std::span<const int32_t> ids);

// True when `path` starts with the .k3tok magic (any other file is text).
bool is_token_file(const std::string& path);

// Reads a .k3tok written for `tok`. Throws k3::Error naming the file when it is truncated, was
// written with another tokenizer, or holds an id out of range.
std::vector<int32_t> read_token_file(const std::string& path, const Tokenizer& tok);

}  // namespace k3
