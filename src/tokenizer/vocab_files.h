// Readers for the two tokenizer files of a K3 model directory. Every error names the file (and
// line or JSON key) and says what was expected and what was found.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace k3::tok {

// tiktoken.model: one "base64(token bytes) rank" line per token. The ranks must be 0..N-1, each
// exactly once (rank = id); token bytes must be distinct and non-empty, and every single byte
// must be a token. Returns the token bytes in rank order.
std::vector<std::string> read_tiktoken_model(const std::string& path);

// Strict standard base64 (RFC 4648 alphabet, '=' padding, length a multiple of 4). Returns false
// and sets `why` on malformed input.
bool base64_decode(std::string_view in, std::string* out, std::string* why);

struct SpecialConfig {
  std::vector<std::string> names;  // 256 names, index = id - vocab_base
  std::vector<bool> skippable;     // HF "special" flag (true for reserved names)
  std::string bos, eos, unk, pad;  // the *_token names; empty when absent
};

constexpr int32_t kNumSpecialTokens = 256;

// tokenizer_config.json: added_tokens_decoder names the specials in
// [vocab_base, vocab_base + 256); the others are "<|reserved_token_{id}|>".
SpecialConfig read_tokenizer_config(const std::string& path, int32_t vocab_base);

}  // namespace k3::tok
