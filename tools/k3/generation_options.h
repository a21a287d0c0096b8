// The generation options shared by k3 run and k3 chat, named as llama.cpp names them:
// -n, -c, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
// --presence-penalty, --frequency-penalty, --seed, --stop (repeatable), --ignore-eos.
// Sampling defaults come from the model's generation_config.json when it has them, else from
// k3's defaults (temperature 1, top-p 0.95, the rest off); flags override both.
#pragma once

#include <string>
#include <vector>

#include "args.h"
#include "k3/generate.h"
#include "k3/tokenizer.h"

namespace k3::cli {

std::vector<Option> generation_options();
// Builds the parameters (a seed of -1 becomes a random seed, reported in params.sampling.seed).
GenerateParams generation_params(const Args& args, const std::string& model_dir,
                                 const Tokenizer& tokenizer);
// "prefill 12 tokens in 0.050 s (240.0 tok/s), decode 32 tokens in 0.200 s (160.0 tok/s)"
std::string timing_line(const GenerateResult& r);

}  // namespace k3::cli
