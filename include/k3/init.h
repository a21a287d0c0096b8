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
  // Safety: refuse (k3::Error naming both sizes) when the checkpoint is larger than the free
  // space of out_dir's filesystem, or when out_dir is a non-empty directory, unless `force`.
  bool force = false;
  uint64_t free_bytes = 0;  // pretend this much space is free (tests); 0 asks the filesystem
  // Polled between blocks of rows; returning true stops the write with a k3::Error. Shards are
  // written under temporary names (.tmp-<name>) and renamed only once all are complete, and an
  // error or cancellation removes the temporary files, so no partial shard keeps a final name.
  std::function<bool()> cancelled = {};
};

// The bytes of tensor data init_checkpoint_from_file would write for this config and options
// (the index's metadata.total_size; headers and config files add a few kB).
uint64_t init_checkpoint_bytes(const std::string& config_path, const InitOptions& opt = {});

// Reads config_path (a full top-level config.json with text_config, or a bare text config) and
// writes the checkpoint into out_dir (created). Throws k3::Error naming the file or the field at
// fault when the config cannot be read, is not JSON or does not validate.
void init_checkpoint_from_file(const std::string& config_path, const std::string& out_dir,
                               const InitOptions& opt = {});

}  // namespace k3
