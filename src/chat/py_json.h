// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it, which is what
// encoding_k3.py puts into prompts and what the K3 tool parser returns as `arguments`:
// non-ASCII kept, control characters escaped as \uXXXX (lowercase hex) or \n-style, floats in
// Python's repr (fixed notation for decimal exponents -4 < e <= 16, so 1e15 is
// "1000000000000000.0" where nlohmann writes "1e+15").
//
// Known differences, all out of reach of input parsed by nlohmann: Python keeps integers of any
// size (nlohmann turns those past 64 bits into doubles) and writes NaN/Infinity (nlohmann's
// parser rejects them).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace k3::chat {

using Json = nlohmann::ordered_json;

enum class JsonSeparators {
  compact,  // separators=(",", ":")
  python,   // json.dumps's default (", ", ": ")
};

// Object keys are written in the order the value holds them; invalid UTF-8 in strings becomes
// U+FFFD (never throws).
std::string py_dumps(const Json& value, JsonSeparators separators);

// The value with object keys sorted at every depth (encoding_k3's deep_sort_dict; byte order of
// UTF-8 equals Python's code-point order).
Json deep_sorted(const Json& value);

}  // namespace k3::chat
