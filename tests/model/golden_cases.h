// The golden cases: every directory with reference logits under tests/data/models (our
// float64 reference) and the public golden set (an independent implementation).
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace k3::test {

inline std::vector<std::string> golden_case_dirs() {
  std::vector<std::string> dirs;
  for (const char* root : {K3_SOURCE_DIR "/tests/data/models", K3_PUBLIC_GOLDEN_DIR}) {
    for (const auto& e : std::filesystem::directory_iterator(root)) {
      if (std::filesystem::exists(e.path() / "logits_prefill.npy"))
        dirs.push_back(e.path().string());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace k3::test
