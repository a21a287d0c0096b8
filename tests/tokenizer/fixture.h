// Shared helpers for the tokenizer tests: the committed tiktoken fixture (see
// tests/reference/make_tokenizer_fixture.py), temporary model directories and running the k3 CLI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/cli_harness.h"
#include "k3/tokenizer.h"

namespace k3::test {

std::string fixture_dir();             // tests/data/tokenizer
const Tokenizer& fixture_tokenizer();  // loaded once

enum class CaseKind : uint8_t { encode = 0, encode_both = 1, decode = 2 };

struct FixtureCase {
  CaseKind kind;
  std::string text;                     // input text, or expected decode output
  std::vector<int32_t> ids;             // ids with specials allowed, or decode input
  std::vector<int32_t> ids_no_special;  // encode_both only
};

const std::vector<FixtureCase>& fixture_cases();  // decompressed and parsed once

// Where two id sequences first differ, with the ids and text around it; empty when equal.
std::string describe_first_difference(const Tokenizer& tok, const std::string& text,
                                      const std::vector<int32_t>& expected,
                                      const std::vector<int32_t>& actual);

// TempDir, CliResult and run_k3() come from common/cli_harness.h.

}  // namespace k3::test
