// Prompt text to token ids for k3 run, k3 chat and k3 perplexity: UTF-8 checked with a message
// that names where the text came from, and the chat format for --chat; Ctrl-C as a cancel flag.
#pragma once

#include <atomic>
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

// Ctrl-C as a cancel flag for Session::set_cancel_flag: installs (once) a SIGINT handler that
// sets the returned flag and then calls the handler that was installed before, if any (so
// line_input's interrupted() keeps working in k3 chat; install that one first). With no earlier
// handler, Ctrl-C no longer ends the process: the caller must poll the flag. Clear it with
// store(false) before each generation.
std::atomic<bool>& cancel_on_sigint();

}  // namespace k3::cli
