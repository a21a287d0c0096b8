// Random-initialised checkpoints in the official layout (`k3 init`), for tests and
// benchmarks. Every tensor is generated row by row from a seed derived from (seed, name, row),
// so output is deterministic, parallel, and streamed to disk: a full-width K3 slice of tens
// of GB never sits in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "k3/init.h"  // InitOptions

namespace k3 {

// Writes config.json, model.safetensors.index.json and the shards into out_dir (created).
// `config` is a full top-level config (with text_config) or a bare text config.
void init_checkpoint(const nlohmann::json& config, const std::string& out_dir,
                     const InitOptions& opt);

// The tensor bytes init_checkpoint would write (the index's metadata.total_size).
uint64_t checkpoint_bytes(const nlohmann::json& config, const InitOptions& opt);

}  // namespace k3
