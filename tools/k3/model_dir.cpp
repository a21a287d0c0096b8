#include "model_dir.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "k3/error.h"

namespace k3::cli {
namespace fs = std::filesystem;

namespace {

bool is_model_dir(const fs::path& dir, bool tokenizer_only) {
  std::error_code ec;
  return fs::is_regular_file(dir / "config.json", ec) ||
         (tokenizer_only && fs::is_regular_file(dir / "tiktoken.model", ec));
}

// A file inside a model directory (config.json, a .safetensors shard, the index) names it.
std::string directory_of(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return path;
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// models/default relative to the working directory, then to the binary's directory and up.
std::vector<fs::path> default_candidates() {
  std::vector<fs::path> out{fs::current_path() / "models" / "default"};
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return out;
  for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    out.push_back(dir / "models" / "default");
    if (dir == dir.root_path()) break;
  }
  return out;
}

}  // namespace

Option model_option() {
  return Option("model", "m", "DIR",
                "model directory, or a file in it (default: $K3_MODEL, else models/default)", "");
}

std::string resolve_model_dir(const Args& args, bool tokenizer_only) {
  if (args.has("model")) {
    const std::string given = args.str("model");
    const std::string dir = directory_of(given);
    // The tokenizer commands name the missing tokenizer file themselves.
    std::error_code ec;
    check(tokenizer_only || is_model_dir(dir, false), given,
          " is not a model directory (no config.json",
          fs::exists(given, ec) ? "" : "; the path does not exist", ")");
    return dir;
  }
  const char* how =
      "the trained default model ships in the repository (restore it with git checkout -- "
      "models/default; ./scripts/quickstart.sh builds k3 and runs it), or make a random one "
      "with: k3 init --config configs/default.json -o models/default && cp "
      "tests/data/tokenizer/tiktoken.model tests/data/tokenizer/tokenizer_config.json "
      "models/default/";
  if (const char* env = std::getenv("K3_MODEL"); env && *env) {
    const std::string dir = directory_of(env);
    check(is_model_dir(dir, tokenizer_only), "no model given (-m DIR) and K3_MODEL=", env,
          " is not a model directory (no config.json there); give -m DIR, or ", how);
    return dir;
  }
  for (const fs::path& dir : default_candidates()) {
    if (is_model_dir(dir, tokenizer_only)) return dir.string();
  }
  fail(
      "no model given (-m DIR) and the default model models/default was not found (looked "
      "in the current directory and above the k3 binary); ",
      how);
}

}  // namespace k3::cli
