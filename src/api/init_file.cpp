// k3/init.h: a config file read and handed to the checkpoint writer (model/init.h).
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "k3/init.h"
#include "model/init.h"

namespace k3 {

void init_checkpoint_from_file(const std::string& config_path, const std::string& out_dir,
                               const InitOptions& opt) {
  std::ifstream f(config_path);
  check(f.good(), "cannot open ", config_path);
  const nlohmann::json config = nlohmann::json::parse(f, nullptr, false);
  check(!config.is_discarded(), config_path, ": not valid JSON");
  init_checkpoint(config, out_dir, opt);
}

}  // namespace k3
