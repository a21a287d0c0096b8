// The weight table: every checkpoint tensor a config implies (spec §9.2), declared once here and
// read by loader validation (checkpoint.cpp), binding (model/weights.cpp), `k3 init`,
// `k3 inspect` and, through k3/weight_table.h, the parameter counts of `k3 cost`.
//
// One TensorSpec per tensor:
//   name       checkpoint name
//   shapes     accepted shapes, dtypes accepted dtypes (the first of each is official: what
//              `k3 init` writes and what parameters are counted on)
//   role       component string, for `k3 inspect` and `k3 cost` grouping
//   key        typed identity for binding: WeightSlot (k3/weight_table.h), layer, expert
//   transform  what binding does with it once, at load:
//     none               a Mat view of the mapped bytes (BF16/F32, widened on the fly)
//     widen_f32          small 1-D tensor copied to fp32 (norms, biases)
//     conv_taps_flatten  KDA conv1d [P, 1, W] copied to fp32 taps [P*W]
//     a_log_slice        A_log copied to fp32 and cut to n_head (stored padded, spec §3.1)
//     attn_res_fold      AttnRes norm and proj (both tagged) multiplied into one fp32 vector
//     kv_b_split         MLA kv_b kept as a view, plus W_UKᵀ per head copied out for the
//                        absorbed form (element copies in its own dtype, so bit-exact)
//     mxfp4_packed       MXFP4 nibbles [O, I/2] of a routed expert: the Mat's data
//     mxfp4_scales       its E8M0 scales [O, I/32]: the same Mat's scales
//   placement  where the bound weight lives: mapped (a view into the mmapped file) or host_f32
//              (a widened host copy). A `device` placement is the next step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "k3/hparams.h"
#include "k3/weight_table.h"
#include "loader/safetensors.h"

namespace k3 {

enum class Transform : uint8_t {
  none,
  widen_f32,
  conv_taps_flatten,
  a_log_slice,
  attn_res_fold,
  kv_b_split,
  mxfp4_packed,
  mxfp4_scales,
};

enum class Placement : uint8_t { mapped, host_f32 };

struct WeightKey {
  WeightSlot slot = WeightSlot::embed;
  int64_t layer = -1;   // -1: model level
  int64_t expert = -1;  // -1: not a routed expert
};

struct TensorSpec {
  std::string name;
  std::vector<std::vector<int64_t>> shapes;  // accepted shapes (first = official)
  std::vector<DType> dtypes;                 // accepted dtypes (first = official)
  std::string role;                          // component, for `k3 inspect` accounting
  WeightKey key;
  Transform transform = Transform::none;
  Placement placement = Placement::mapped;
};

inline const std::string kModelPrefix = "language_model.model.";
inline const std::string kLmHead = "language_model.lm_head.weight";

std::string layer_prefix(int64_t l);  // "language_model.model.layers.{l}."

// The main model's tensors, then the MTP head's (layer n_layer) when hp.n_mtp == 1.
std::vector<TensorSpec> expected_tensors(const HParams& hp);

// Logical parameters of a spec's official shape (MXFP4: two per packed byte, none in scales).
int64_t logical_params(const TensorSpec& spec);

// Tensors the text engine ignores without complaint (vision tower, projector).
bool is_ignored_tensor(const std::string& name);

}  // namespace k3
