// A checkpoint directory in the official layout (spec §9.1): config.json,
// model.safetensors.index.json + shards (or a single model.safetensors). Opening it maps every
// shard, validates the config, and checks every tensor against the name table; all missing,
// unexpected, mis-shaped and wrongly typed tensors are reported together in one k3::Error.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "k3/hparams.h"
#include "loader/safetensors.h"

namespace k3 {

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const HParams& hparams() const { return hp_; }
  // A tensor the name table declares (validated at open). Throws k3::Error for an unknown name.
  const TensorInfo& tensor(const std::string& name) const;
  const std::map<std::string, const TensorInfo*>& tensors() const { return by_name_; }
  size_t n_files() const { return files_.size(); }
  size_t mapped_bytes() const;

 private:
  void open_shards();
  void check_counts_fit() const;
  void validate() const;

  std::string dir_;
  HParams hp_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> by_name_;
};

}  // namespace k3
