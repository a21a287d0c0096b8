// Prompt text to token ids for k3 run, k3 chat and k3 perplexity: UTF-8 checked with a message
// that names where the text came from, and the chat format for --chat.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "k3/tokenizer.h"

namespace k3::cli {

struct PromptText {
  std::string text;
  std::string source;  // "standard input", a file name, "the prompt (-p)"
};

// Throws k3::Error naming the source and byte offset when the text is not valid UTF-8.
void check_utf8(const PromptText& p);
// Plain text with special-token texts allowed (as k3 tokenize encodes it).
std::vector<int32_t> encode_prompt(const Tokenizer& tok, const PromptText& p);

}  // namespace k3::cli
