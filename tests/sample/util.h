// Helpers for the sampling, generation, perplexity and run/chat/perplexity CLI tests: a tiny
// random K3 model with the project tokenizer (vocab 6516), made once per test process by
// `k3 init` in a temp dir, temp dirs, and running the built k3.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "k3/k3.h"
#include "tokenizer/tokenizer.h"

namespace k3::test {

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string write(const std::string& name, const std::string& content) const;  // the path

 private:
  std::string path_;
};

std::string tokenizer_dir();  // tests/data/tokenizer
// Directory of the tiny model (config + weights + tokenizer files); made on first use.
const std::string& tiny_model_dir();
const Model& tiny_model();
const Tokenizer& tiny_tokenizer();

struct CliResult {
  int exit_code;
  std::string out, err;
};

// Runs the built k3 with `args` (shell-quoted), feeding `stdin_data`; `env` adds variables.
CliResult run_k3(const std::vector<std::string>& args, const std::string& stdin_data = "",
                 const std::map<std::string, std::string>& env = {});

std::string read_file(const std::string& path);

}  // namespace k3::test
