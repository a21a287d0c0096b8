#include "run_prompt.h"

#include <cstdio>

#include "k3/error.h"

namespace k3::cli {

void check_utf8(const PromptText& p) {
  const size_t bad = find_invalid_utf8(p.text);
  if (bad == std::string::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(p.text[bad]));
  fail(p.source, " is not valid UTF-8: ill-formed byte ", byte, " at byte offset ", bad);
}

std::vector<int32_t> encode_prompt(const Tokenizer& tok, const PromptText& p) {
  check_utf8(p);
  return tok.encode(p.text);
}

}  // namespace k3::cli
