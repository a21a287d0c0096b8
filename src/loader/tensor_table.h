// The one table that maps every checkpoint tensor name to its expected shape and dtypes
// (spec §9.2). Derived from HParams; the loader checks the files against it and the
// model binds weights through it, so names and shapes are written down exactly once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "k3/hparams.h"
#include "loader/safetensors.h"

namespace k3 {

struct TensorSpec {
  std::string name;
  std::vector<std::vector<int64_t>> shapes;  // accepted shapes (first = official)
  std::vector<DType> dtypes;                 // accepted dtypes (first = official)
  std::string role;                          // component, for `k3 inspect` accounting
};

inline const std::string kModelPrefix = "language_model.model.";
inline const std::string kLmHead = "language_model.lm_head.weight";

std::string layer_prefix(int64_t l);  // "language_model.model.layers.{l}."

std::vector<TensorSpec> expected_tensors(const HParams& hp);

// Tensors the text engine ignores without complaint (vision tower, projector).
bool is_ignored_tensor(const std::string& name);

}  // namespace k3
