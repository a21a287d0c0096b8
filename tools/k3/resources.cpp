#include "resources.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace k3::cli {
namespace fs = std::filesystem;

uint64_t model_mapped_bytes(const std::string& dir) {
  std::error_code ec;
  fs::path d = dir;
  if (!fs::is_directory(d, ec)) d = d.parent_path();
  if (d.empty()) d = ".";
  uint64_t total = 0;
  for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".safetensors") continue;
    if (it->path().filename().string().rfind(".tmp-", 0) == 0) continue;  // `k3 init` leftovers
    std::error_code size_ec;
    const uint64_t n = fs::file_size(it->path(), size_ec);
    if (!size_ec) total += n;
  }
  return total;
}

uint64_t machine_memory_bytes() {
  if (const char* env = std::getenv("K3_MEM_BYTES")) return std::strtoull(env, nullptr, 10);
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream in(line.substr(9));
    uint64_t kb = 0;
    in >> kb;
    return kb * 1024;
  }
  return 0;
}

void warn_if_model_exceeds_memory(const std::string& dir) {
  const uint64_t need = model_mapped_bytes(dir), have = machine_memory_bytes();
  if (have == 0 || need <= have) return;
  std::fprintf(stderr,
               "k3: warning: the model maps %.2f GB but this machine has %.2f GB of memory: "
               "expect it to page from disk (very slow)\n",
               need / 1e9, have / 1e9);
}

}  // namespace k3::cli
