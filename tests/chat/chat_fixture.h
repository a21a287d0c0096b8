// Shared by the chat tests: the committed fixture tokenizer (tests/data/tokenizer: a small
// tiktoken vocabulary with K3's special-token names at K3's offsets) and small helpers.
#pragma once

#include <string>
#include <vector>

#include "chat/chat_encode.h"
#include "k3/tokenizer.h"

namespace k3::chat::test {

inline const Tokenizer& fixture_tokenizer() {
  static const Tokenizer tok =
      Tokenizer::load(std::string(K3_SOURCE_DIR) + "/tests/data/tokenizer");
  return tok;
}

// The ids the segments should give, computed the long way: one Tokenizer::encode per segment.
inline std::vector<int32_t> encode_each(const Tokenizer& tok, const std::vector<Segment>& segs) {
  std::vector<int32_t> ids;
  for (const Segment& s : segs) {
    std::vector<int32_t> part = tok.encode(s.text, s.control);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

inline std::string debug(const Json& request, const Options& options = {}) {
  return segments_debug(build_segments(request, options));
}

}  // namespace k3::chat::test
