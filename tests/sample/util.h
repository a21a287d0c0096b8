// Helpers for the sampling, generation, perplexity and run/chat/perplexity CLI tests: a tiny
// random K3 model with the project tokenizer (vocab 6516), made once per test process by
// `k3 init` in a temp dir, temp dirs, and running the built k3.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/cli_harness.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"

namespace k3::test {

std::string tokenizer_dir();  // tests/data/tokenizer
// Directory of the tiny model (config + weights + tokenizer files); made on first use.
const std::string& tiny_model_dir();
const Model& tiny_model();
const Tokenizer& tiny_tokenizer();

// The k3 CLI runner and TempDir live in common/cli_harness.h.
inline std::string read_file(const std::string& path) { return read_file_bytes(path); }

}  // namespace k3::test
