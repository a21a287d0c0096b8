// Tokenizer files on arbitrary bytes: the input is split at its first NUL byte into a
// tiktoken.model and a tokenizer_config.json. Loading either fails with k3::Error or gives a
// tokenizer that encodes and decodes a fixed text (with specials) back to itself.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.h"
#include "k3/error.h"
#include "k3/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view model = all.substr(0, nul);
  const std::string_view config = nul == std::string_view::npos ? "{}" : all.substr(nul + 1);
  const std::string model_path = k3::fuzz::scratch_file("tiktoken.model", model);
  const std::string config_path = k3::fuzz::scratch_file("tokenizer_config.json", config);
  try {
    const k3::Tokenizer tok = k3::Tokenizer::load_files(model_path, config_path);
    const std::string text = "ab a\n<|im_end|>";
    k3::fuzz::require(tok.decode(tok.encode(text)) == text, "round trip after load");
    k3::fuzz::require(tok.n_vocab() == tok.vocab_base() + 256, "n_vocab");
  } catch (const k3::Error&) {
  }
  return 0;
}
