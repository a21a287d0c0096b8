// Training parameters: every tensor of a checkpoint as an fp32 master copy, by its checkpoint
// name (an MXFP4 expert matrix, stored as .weight_packed + .weight_scale, becomes one dequantized
// "<base>.weight"). The same layout holds gradients.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loader/checkpoint.h"

namespace k3 {

struct Param {
  std::vector<int64_t> shape;
  std::vector<float> value;
};

class ParamSet {
 public:
  // Widens BF16/F32 tensors exactly and dequantizes MXFP4 pairs exactly.
  static ParamSet from_checkpoint(const Checkpoint& ckpt);
  // The same names and shapes, all zeros.
  ParamSet zeros_like() const;

  float* operator[](const std::string& name);  // throws k3::Error naming an unknown tensor
  const float* operator[](const std::string& name) const;
  const std::map<std::string, Param>& all() const { return params_; }
  // Writes every tensor as F32 to one safetensors file, names without `strip_prefix`.
  void write_safetensors(const std::string& path, const std::string& strip_prefix = "") const;

 private:
  std::map<std::string, Param> params_;
};

}  // namespace k3
