// Training checkpoints: the official layout (config.json, model.safetensors.index.json, one
// F32 shard, the tokenizer files) that every command loads, plus what a bit-exact resume needs:
// optimizer.safetensors (the moments, "m/<name>" and "v/<name>") and train_state.json (step,
// sampler RNG, the balancers' float64 biases, the logged history). The whole directory is
// written under DIR.tmp and renamed into place, so DIR is always a complete checkpoint.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "k3/train.h"
#include "train/optimizer.h"
#include "train/params.h"

namespace k3::train {

struct TrainState {
  int64_t step = 0;
  std::string rng;                          // std::mt19937_64 in its text form
  std::vector<std::vector<double>> biases;  // one per MoE layer, in layer order
  std::vector<TrainPoint> history;
};

using SaveHook = std::function<void(const std::string& dir, const std::vector<TrainPoint>&)>;

// `source_dir` supplies config.json (its quantization_config dropped: the shard is F32),
// `tokenizer_dir` the tokenizer files.
void save_training_checkpoint(const std::string& dir, const std::string& source_dir,
                              const std::string& tokenizer_dir, const ParamSet& params,
                              Optimizer& opt, const TrainState& state, const SaveHook& hook);
// Fills opt's moments and step from DIR; throws k3::Error when DIR is not a training checkpoint
// or its moments do not match the parameters.
TrainState load_training_state(const std::string& dir, Optimizer& opt);

}  // namespace k3::train
