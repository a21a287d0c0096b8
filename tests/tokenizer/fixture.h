// Shared helpers for the tokenizer tests: the committed tiktoken fixture (see
// tests/reference/make_tokenizer_fixture.py), temporary model directories and running the k3 CLI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

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

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  void write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

struct CliResult {
  int exit_code;
  std::string out, err;
};

// Runs the built k3 with `args` (shell-quoted here), feeding `stdin_data`.
CliResult run_k3(const std::vector<std::string>& args, const std::string& stdin_data = "");

std::string read_file_bytes(const std::string& path);

}  // namespace k3::test
