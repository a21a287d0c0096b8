// k3/inspect.h: a checkpoint described through the loader's name table.
#include "k3/inspect.h"

#include <string_view>

#include "loader/checkpoint.h"
#include "loader/tensor_table.h"

namespace k3 {
namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

CheckpointSummary describe_checkpoint(const std::string& dir) {
  const Checkpoint ckpt(dir);
  CheckpointSummary out;
  out.dir = dir;
  out.hparams = ckpt.hparams();
  out.n_files = ckpt.n_files();
  for (const TensorSpec& spec : expected_tensors(out.hparams)) {
    const TensorInfo& t = ckpt.tensor(spec.name);
    const bool packed = ends_with(spec.name, ".weight_packed");
    const bool scale = ends_with(spec.name, ".weight_scale");
    TensorSummary s;
    s.name = spec.name;
    s.shape = t.shape;
    s.dtype = dtype_name(t.dtype);
    s.role = spec.role;
    s.bytes = t.nbytes;
    s.params = scale ? 0 : (packed ? 2 * t.numel() : t.numel());
    s.mxfp4 = packed || scale;
    out.tensor_bytes += s.bytes;
    out.tensors.push_back(std::move(s));
  }
  return out;
}

}  // namespace k3
