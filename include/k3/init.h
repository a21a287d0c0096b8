// Random-initialised checkpoints in the official K3 layout (`k3 init`), for tests and
// benchmarks: config.json, model.safetensors.index.json and the shards. Every tensor is
// generated row by row from a seed derived from (seed, name, row), so output is deterministic,
// parallel, and streamed to disk: a full-width K3 slice of tens of GB never sits in memory.
//
//   k3::InitOptions opt{.seed = 1, .mxfp4 = true};
//   k3::init_checkpoint_from_file("configs/default.json", "/tmp/k3-small", opt);
//   auto model = k3::Model::load("/tmp/k3-small");  // loads like any official checkpoint
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace k3 {

struct InitOptions {
  uint64_t seed = 0;
  bool mxfp4 = false;                 // pack routed experts as MXFP4
  uint64_t shard_bytes = 4ull << 30;  // start a new shard past this size
  std::function<void(uint64_t done, uint64_t total)> progress = {};  // optional
};

// Reads config_path (a full top-level config.json with text_config, or a bare text config) and
// writes the checkpoint into out_dir (created). Throws k3::Error naming the file or the field at
// fault when the config cannot be read, is not JSON or does not validate.
void init_checkpoint_from_file(const std::string& config_path, const std::string& out_dir,
                               const InitOptions& opt = {});

}  // namespace k3
