// Checkpoint inspection (`k3 inspect`): what a checkpoint directory holds, read from its files
// without building the model. Opening validates it as Model::load does: every missing,
// unexpected, mis-shaped or wrongly typed tensor is reported together in one k3::Error.
//
//   k3::CheckpointSummary s = k3::describe_checkpoint("path/to/checkpoint");
//   for (const k3::TensorSummary& t : s.tensors)
//     std::printf("%s %s %zu bytes\n", t.name.c_str(), t.dtype.c_str(), t.bytes);
//   int64_t mla_layers = s.hparams.n_layers_of(k3::AttnKind::mla);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "k3/hparams.h"

namespace k3 {

struct TensorSummary {
  std::string name;            // checkpoint name, e.g. "language_model.lm_head.weight"
  std::vector<int64_t> shape;  // as stored
  std::string dtype;           // as stored: "BF16", "F16", "F32" or "U8"
  std::string role;            // component, e.g. "embedding", "kda attention", "moe routed experts"
  size_t bytes = 0;            // bytes in the file
  int64_t params = 0;          // parameters held: the element count, except MXFP4 (below)
  bool mxfp4 = false;          // MXFP4 packed weights (2 parameters a byte) or their scales (0)
};

struct CheckpointSummary {
  std::string dir;
  HParams hparams;                     // the validated config.json
  std::vector<TensorSummary> tensors;  // every tensor the engine uses, in name-table order
  size_t n_files = 0;                  // safetensors files
  size_t tensor_bytes = 0;             // sum of tensors[i].bytes
};

CheckpointSummary describe_checkpoint(const std::string& dir);

}  // namespace k3
