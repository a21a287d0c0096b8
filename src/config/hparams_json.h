// config.json (already parsed) -> HParams, with every field validated before use.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "k3/hparams.h"

namespace k3 {

// Parses and validates; `source` names the file in error messages. Unknown fields in
// text_config, linear_attn_config and quantization_config are not errors: each draws one warning
// (with the nearest known field name when one is close) through the config warning sink.
HParams hparams_from_json(const nlohmann::json& config, const std::string& source);

// Receives each config warning, e.g. "config.json: text_config.num_experts_per_tok is not a known
// field; did you mean num_experts_per_token?" (no "k3: warning: " prefix, no newline).
using ConfigWarningSink = std::function<void(const std::string& message)>;

// Installs `sink` and returns the previous one. An empty sink restores the default, which writes
// "k3: warning: <message>" to stderr, each distinct message once per process.
ConfigWarningSink set_config_warning_sink(ConfigWarningSink sink);

// What a validated config implies its checkpoint holds: the number of tensors and a lower bound
// on their bytes (every tensor at its smallest accepted dtype). A checkpoint's shards must hold
// at least as much; comparing first keeps a tiny file with a huge config from building a
// per-layer x expert table of millions of entries.
struct ImpliedSize {
  int64_t tensors = 0;
  int64_t min_bytes = 0;  // saturates at INT64_MAX
};
ImpliedSize implied_size(const HParams& hp);

// The 1-based "line:column" of byte `offset` (0-based) in `text`; columns count bytes.
std::string text_line_column(const std::string& text, size_t offset);

}  // namespace k3
