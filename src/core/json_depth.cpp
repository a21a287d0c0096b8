#include "k3/json_depth.h"

#include "core/error.h"

namespace k3 {

size_t json_too_deep_at(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text is the parser's problem, not this scan's
    }
  }
  return std::string_view::npos;
}

void check_json_depth(std::string_view text, const std::string& where, int limit) {
  const size_t at = json_too_deep_at(text, limit);
  if (at != std::string_view::npos) {
    fail(where, ": JSON nested deeper than ", limit, " levels (at byte ", at, ")");
  }
}

}  // namespace k3
