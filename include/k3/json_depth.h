// A nesting-depth limit for JSON read from untrusted files and requests (config.json, safetensors
// headers, tokenizer and generation configs, chat requests and tool-call arguments). Parsing
// itself is iterative, but printing a value and walking it are recursive: a 100,000-deep array
// would overflow the stack. The scan is one cheap pass before the real parse.
#pragma once

#include <string>
#include <string_view>

namespace k3 {

// Far above any real file (configs nest 4 deep) and far below what recursion can take.
constexpr int kMaxJsonDepth = 128;

// The byte offset where `text` first nests deeper than `limit`, or std::string_view::npos.
size_t json_too_deep_at(std::string_view text, int limit = kMaxJsonDepth);

// Throws k3::Error "<where>: JSON nested deeper than 128 levels" when arrays/objects in `text`
// nest deeper than `limit`. Brackets inside strings do not count. Says nothing about validity.
void check_json_depth(std::string_view text, const std::string& where, int limit = kMaxJsonDepth);

}  // namespace k3
