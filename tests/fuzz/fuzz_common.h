// Helpers shared by the libFuzzer targets (docs/FUZZING.md): a per-process scratch file and the
// fixture tokenizer's location. A target returns normally on k3::Error (bad input, handled) and
// calls abort() when a property fails, which libFuzzer reports as a crash with the input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace k3::fuzz {

// A file in $TMPDIR (default /tmp) unique to this process, rewritten with `bytes` on each call.
inline std::string scratch_file(const std::string& name, std::string_view bytes) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/k3_fuzz_" + std::to_string(getpid()) + "_" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// The committed fixture tokenizer: $K3_FUZZ_TOKENIZER_DIR, else the source tree's copy.
inline std::string tokenizer_dir() {
  const char* dir = std::getenv("K3_FUZZ_TOKENIZER_DIR");
  return dir && *dir ? dir : K3_SOURCE_DIR "/tests/data/tokenizer";
}

// A property that must hold for every input.
inline void require(bool ok, const char* property) {
  if (!ok) {
    std::fprintf(stderr, "property failed: %s\n", property);
    std::abort();
  }
}

}  // namespace k3::fuzz
