// Official-layout quirks the loader must accept (spec §1.1, §3.1): quantization_config inside
// text_config instead of at the top level, and A_log padded to head_dim with unused entries.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "k3/k3.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kCase = K3_PUBLIC_GOLDEN_DIR "/p1_mxfp4_7layer";  // MXFP4, A_log [16] for 3 heads
const std::vector<int64_t> kIds = {5, 77, 134, 71, 229, 357, 116, 60, 231, 172};

fs::path fresh_copy(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("k3_quirk_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::copy(kCase, dir);
  for (auto& e : fs::directory_iterator(dir)) {
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  return dir;
}

std::vector<float> run(const fs::path& dir) {
  auto model = k3::Model::load(dir.string());
  k3::Sequence seq(*model);
  return seq.prefill(kIds);
}

TEST(LayoutQuirks, QuantizationConfigInsideTextConfig) {
  fs::path dir = fresh_copy("qc");
  std::ifstream in(dir / "config.json");
  json c = json::parse(in);
  in.close();
  c["text_config"]["quantization_config"] = c["quantization_config"];
  c.erase("quantization_config");
  std::ofstream(dir / "config.json") << c.dump(1);
  EXPECT_EQ(run(dir), run(kCase));
  fs::remove_all(dir);
}

TEST(LayoutQuirks, ALogPaddingEntriesAreIgnored) {
  // Overwrite A_log[3..15] (the padding behind the 3 KDA heads) of every KDA layer with large
  // values: only A_log[h] for h < num_heads may be read, so the logits must not move.
  fs::path dir = fresh_copy("alog");
  int modified = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string header(n, '\0');
    f.read(header.data(), static_cast<std::streamsize>(n));
    json h = json::parse(header);
    for (auto& [name, t] : h.items()) {
      if (name.size() < 5 || name.substr(name.size() - 5) != "A_log") continue;
      const uint64_t begin = t["data_offsets"][0];
      ASSERT_EQ(t["shape"][0], 16);
      for (int i = 3; i < 16; ++i) {
        const float junk = 7.0f + i;
        f.seekp(static_cast<std::streamoff>(8 + n + begin + 4 * i));
        f.write(reinterpret_cast<const char*>(&junk), 4);
      }
      ++modified;
    }
  }
  ASSERT_EQ(modified, 5);  // the five KDA layers of p1
  EXPECT_EQ(run(dir), run(kCase));
  fs::remove_all(dir);
}

}  // namespace
