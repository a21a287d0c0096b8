// k3/init.h: a config file read and handed to the checkpoint writer (model/init.h).
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "k3/init.h"
#include "k3/json_depth.h"
#include "model/init.h"

namespace k3 {

namespace {

nlohmann::json read_config(const std::string& config_path) {
  std::ifstream f(config_path);
  check(f.good(), "cannot open ", config_path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  check_json_depth(text, config_path);
  nlohmann::json config = nlohmann::json::parse(text, nullptr, false);
  check(!config.is_discarded(), config_path, ": not valid JSON");
  return config;
}

}  // namespace

void init_checkpoint_from_file(const std::string& config_path, const std::string& out_dir,
                               const InitOptions& opt) {
  init_checkpoint(read_config(config_path), out_dir, opt);
}

uint64_t init_checkpoint_bytes(const std::string& config_path, const InitOptions& opt) {
  return checkpoint_bytes(read_config(config_path), opt);
}

}  // namespace k3
