// The optimiser's view of a training model: one train::Param per tensor of a ParamSet (fp32
// master copies, train/params.h) with its gradient from a ParamSet of the same layout, in the
// group its name has in the config (param_groups.h).
#pragma once

#include <vector>

#include "k3/hparams.h"
#include "train/optimizer.h"
#include "train/params.h"

namespace k3::train {

// Throws k3::Error when `grads` lacks a tensor of `values` or has another shape.
std::vector<Param> optimizer_params(ParamSet& values, ParamSet& grads, const HParams& hp,
                                    bool per_head_muon);

}  // namespace k3::train
