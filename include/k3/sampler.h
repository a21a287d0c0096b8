// Token sampling: penalties, temperature, top-k, top-p, min-p, then a draw from the remaining
// distribution with a seeded generator. Plain library code: no I/O, no model, no tokenizer.
// docs/sampling.md defines every step; the definitions are summarised here.
//
//   k3::Sampler sampler({.temperature = 0.8f, .top_p = 0.95f, .seed = 42});
//   int32_t id = sampler.sample(logits, history);   // logits [vocab], history = context ids
//
// The chain, in this order (each filter sees the distribution renormalised over what is left):
//   0. logit bias (OpenAI logit_bias, llama.cpp --logit-bias): l[id] += bias, -inf bans a token.
//   1. penalties on the biased logits, over the last `penalty_last_n` ids of the context, for each
//      distinct id there with count c (llama.cpp / OpenAI definitions):
//        repeat:              l = l > 0 ? l / repeat_penalty : l * repeat_penalty
//        presence, frequency: l -= presence_penalty * (c > 0) + frequency_penalty * c
//   2. temperature <= 0: greedy, the arg-max of the penalised logits (ties: lowest id); done.
//      Otherwise l /= temperature, p = softmax(l).
//   3. top-k (k > 0): keep the k most likely (ties broken by lower id).
//   4. top-p (p < 1): sort by probability, keep the shortest prefix whose mass >= top_p.
//   5. min-p (> 0): keep tokens with p >= min_p * p_max.
//   6. draw: one uniform u in [0, 1) from std::mt19937_64(seed) (its 53 high bits) per token,
//      then the inverse CDF over the kept tokens in list order: by probability, then id, when
//      top-k or top-p ran, else by id. The same seed gives the same tokens on every platform.
// Temperature comes before the filters as in Hugging Face and vLLM (llama.cpp applies it last).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace k3 {

struct SamplingParams {
  float temperature = 1.0f;        // <= 0: greedy
  int32_t top_k = 0;               // 0: off
  float top_p = 1.0f;              // 1: off
  float min_p = 0.0f;              // 0: off
  float repeat_penalty = 1.0f;     // 1: off
  float presence_penalty = 0.0f;   // 0: off
  float frequency_penalty = 0.0f;  // 0: off
  int32_t penalty_last_n = 64;     // window of recent context ids; -1: whole context, 0: off
  uint64_t seed = 0;
};

// (token id, value added to its logit). Kept out of SamplingParams so that it stays a plain
// value type (GCC 12 mis-warns on vectors inside nested designated initialisers).
using LogitBias = std::vector<std::pair<int32_t, float>>;

// Throws k3::Error naming the field when a value is out of range (e.g. top_p outside (0, 1]).
void validate(const SamplingParams& p);
void validate(const LogitBias& bias);  // numbers or -inf

struct Candidate {
  int32_t id;
  float logit;
  float p;  // probability; set by softmax()
};

// Step 0, in place; ids outside the row are ignored.
void apply_logit_bias(std::span<float> logits, const LogitBias& bias);
// Step 1, in place on a full logits row. `history` is the whole context; only its last
// penalty_last_n ids count. Ids outside the row are ignored.
void apply_penalties(std::span<float> logits, std::span<const int32_t> history,
                     const SamplingParams& p);
int32_t argmax(std::span<const float> logits);  // lowest id on ties

// Steps 2-6 on a candidate list. Each filter keeps at least one candidate and renormalises the
// probabilities of what it keeps; top-k and top-p leave the list sorted by probability
// (descending), then id; min-p keeps the order it finds.
std::vector<Candidate> candidates(std::span<const float> logits, float temperature);  // id order
void softmax(std::vector<Candidate>& c);  // sets p from logit; keeps the order
void top_k_filter(std::vector<Candidate>& c, int32_t k);
void top_p_filter(std::vector<Candidate>& c, float top_p);
void min_p_filter(std::vector<Candidate>& c, float min_p);
int32_t draw(const std::vector<Candidate>& c, double u);  // u in [0, 1)

// The whole chain with its own generator. Sampling is deterministic given the seed and the
// sequence of (logits, history) calls.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& p, LogitBias bias = {});
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  // The distribution step 6 draws from (after penalties and filters); for tests and tools.
  std::vector<Candidate> distribution(std::span<const float> logits,
                                      std::span<const int32_t> history) const;
  double next_uniform();  // [0, 1), 53 random bits
  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  LogitBias bias_;
  std::mt19937_64 rng_;
};

}  // namespace k3
