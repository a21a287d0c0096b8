// config.json (already parsed) -> HParams, with every field validated before use.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "k3/hparams.h"

namespace k3 {

// Parses and validates; `source` names the file in error messages.
HParams hparams_from_json(const nlohmann::json& config, const std::string& source);

}  // namespace k3
