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
#include "loader/safetensors_writer.h"

namespace k3 {

// Writes config.json, model.safetensors.index.json and the shards into out_dir (created).
// `config` is a full top-level config (with text_config) or a bare text config.
void init_checkpoint(const nlohmann::json& config, const std::string& out_dir,
                     const InitOptions& opt);

// The top-level config as written: architectures and model_type set, text_config wrapped, and
// with `mxfp4` the compressed-tensors quantization_config that marks routed experts as MXFP4.
nlohmann::json official_config(const nlohmann::json& config, bool mxfp4);

// Streams the bytes of one planned tensor (official name, dtype and shape) into the writer.
using TensorSource = std::function<void(const PlannedTensor&, SafetensorsWriter&)>;

// Writes the official layout of `top` (an official_config) into out_dir: the tensor table cut
// into shards of opt.shard_bytes, each tensor's bytes from `source`, the index and config.json.
// Everything is written under temporary names and renamed at the end; an error removes them.
// Refuses a non-empty out_dir or a too-small disk as opt says.
void write_official_checkpoint(const nlohmann::json& top, const std::string& out_dir,
                               const InitOptions& opt, const TensorSource& source);

// The tensor bytes init_checkpoint would write (the index's metadata.total_size).
uint64_t checkpoint_bytes(const nlohmann::json& config, const InitOptions& opt);

}  // namespace k3
