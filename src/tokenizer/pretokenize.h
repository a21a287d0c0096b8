// K3's pre-tokenizer (spec §10.3), hand-written. It yields exactly the pieces that tiktoken's
// regex engine finds for the pattern
//   [\p{Han}]+
//   | [^\r\n\p{L}\p{N}]?  UPPER*  LOWER+  (?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   | [^\r\n\p{L}\p{N}]?  UPPER+  LOWER*  (?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   | \p{N}{1,3}
//   | ' '?[^\s\p{L}\p{N}]+[\r\n]*
//   | \s*[\r\n]+
//   | \s+(?!\S)
//   | \s+
// with UPPER = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] and LOWER = [\p{Ll}\p{Lm}\p{Lo}\p{M}&&
// [^\p{Han}]], under leftmost-first (backtracking) semantics. Each alternative is solved in
// closed form (see pretokenize.cpp), so the work is linear in the text. Equality with tiktoken
// is checked by tests/tokenizer against fixtures made by tiktoken itself.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace k3::tok {

struct Span {
  uint32_t begin, end;  // byte offsets into the text
};

// Appends the pieces of `text` (valid UTF-8, at most 4 GiB) to `out`, in order, covering it.
void pretokenize(std::string_view text, std::vector<Span>& out);

}  // namespace k3::tok
