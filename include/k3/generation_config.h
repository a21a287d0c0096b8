// The model's recommended sampling settings from DIR/generation_config.json (Hugging Face
// format), when the file exists: temperature, top_k, top_p, min_p, repetition_penalty, and
// do_sample = false meaning greedy. Fields that are absent keep the given defaults; a field of
// the wrong type is an error naming the file and field.
//
//   k3::SamplingParams p = k3::sampling_from_generation_config(dir, {.temperature = 1.0f});
//   p.seed = 42;   // command-line flags override what the model recommends
#pragma once

#include <string>

#include "k3/sampler.h"

namespace k3 {

SamplingParams sampling_from_generation_config(const std::string& model_dir,
                                               SamplingParams defaults);

}  // namespace k3
