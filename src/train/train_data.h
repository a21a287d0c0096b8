// Training data: text files tokenised with the model's tokenizer into one token stream
// (documents separated by the end-of-message token), random training windows, and the
// held-out evaluation (mean loss, perplexity, bits per byte) over consecutive windows.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "k3/hparams.h"
#include "k3/tokenizer.h"
#include "train/model_train.h"

namespace k3::train {

struct TokenStream {
  std::vector<int64_t> ids;
  std::vector<int32_t> bytes;  // [ids.size()] UTF-8 bytes each token stands for
};

// Each file is text, or a .k3tok of pre-tokenised ids (k3/token_file.h) that must match `tok`:
// both give the same stream. Throws k3::Error naming a file that cannot be read, is empty, was
// tokenised with another tokenizer, or tokenises past `vocab`.
TokenStream tokenize_files(const Tokenizer& tok, const std::vector<std::string>& files,
                           int64_t vocab);

// A window of S inputs and the S next tokens, at a uniform random offset.
struct Window {
  std::vector<int64_t> tokens, targets;
};
Window sample_window(const TokenStream& data, int64_t S, std::mt19937_64& rng);

struct EvalResult {
  double loss = 0, perplexity = 0, bits_per_byte = 0;
  int64_t tokens = 0;
};
// Up to `windows` consecutive non-overlapping windows of S from the start of `data`.
EvalResult evaluate(const HParams& hp, const ParamSet& params, const TokenStream& data, int64_t S,
                    int64_t windows, const TrainOptions& opt = {});
// The same with the windows' losses from elsewhere (the GPU pass): loss_sum returns the sum of
// the windows' mean losses.
using WindowLossSum = std::function<double(const std::vector<Window>&)>;
EvalResult evaluate_with(const TokenStream& data, int64_t S, int64_t windows,
                         const WindowLossSum& loss_sum);

}  // namespace k3::train
