#include "generation_options.h"

#include <cstdint>
#include <cstdio>
#include <random>

#include "common_options.h"
#include "k3/error.h"
#include "k3/generation_config.h"
#include "k3/hparams.h"

namespace k3::cli {

std::vector<Option> generation_options() {
  return {
      Option("n-predict", "n", "N",
             "tokens to generate at most; -1: until end of message or context", "-1")
          .range(-1),
      ctx_option("context limit in tokens (prompt + output)", "4096"),
      {"temp", "", "T", "temperature; 0 = greedy (default: generation_config.json, else 1)", ""},
      Option("top-k", "", "N", "keep the N most likely tokens; 0 = off (default: 0)", "")
          .range(0, INT32_MAX),
      {"top-p", "", "P", "nucleus: smallest set with mass >= P; 1 = off (default: 0.95)", ""},
      {"min-p", "", "P", "drop tokens below P x the top probability; 0 = off (default: 0)", ""},
      {"repeat-penalty", "", "R", "divide positive / multiply negative logits of recent tokens",
       "1.0"},
      Option("repeat-last-n", "", "N", "recent tokens the penalties look at; -1 = whole context",
             "64")
          .range(-1, INT32_MAX),
      {"presence-penalty", "", "A", "subtract A from the logit of every recent token", "0.0"},
      {"frequency-penalty", "", "A", "subtract A x count from the logit of recent tokens", "0.0"},
      seed_option("-1", true),
      {"logit-bias", "l", "ID(+|-)B",
       "add B to token ID's logit, e.g. 6262+2 or 6262-inf; repeatable", ""},
      {"stop", "", "TEXT", "stop when TEXT is generated (not printed); repeatable", ""},
      {"ignore-eos", "", "", "do not stop at <|end_of_msg|> or [EOS]", ""},
  };
}

namespace {

// "6262+1.5", "6262-inf"
std::pair<int32_t, float> parse_logit_bias(const std::string& text) {
  const size_t sign = text.find_first_of("+-", 1);
  size_t used = 0;
  int64_t id = -1;
  double bias = 0;
  try {
    check(sign != std::string::npos, "");
    id = std::stoll(text.substr(0, sign), &used);
    check(used == sign, "");
    const std::string value = text.substr(sign);
    bias = std::stod(value, &used);
    check(used == value.size(), "");
  } catch (const std::exception&) {
    fail("--logit-bias: expected ID+BIAS or ID-BIAS (e.g. 6262+2, 6262-inf), found '", text, "'");
  }
  check(id >= 0 && id <= INT32_MAX, "--logit-bias: token id ", id, " is out of range");
  return {static_cast<int32_t>(id), static_cast<float>(bias)};
}

SamplingParams sampling_params(const Args& args, const std::string& model_dir) {
  SamplingParams p =
      sampling_from_generation_config(model_dir, {.temperature = 1.0f, .top_p = 0.95f});
  if (args.has("temp")) p.temperature = static_cast<float>(args.number("temp"));
  if (args.has("top-k")) p.top_k = static_cast<int32_t>(args.integer("top-k"));
  if (args.has("top-p")) p.top_p = static_cast<float>(args.number("top-p"));
  if (args.has("min-p")) p.min_p = static_cast<float>(args.number("min-p"));
  p.repeat_penalty = static_cast<float>(args.number("repeat-penalty"));
  p.penalty_last_n = static_cast<int32_t>(args.integer("repeat-last-n"));
  p.presence_penalty = static_cast<float>(args.number("presence-penalty"));
  p.frequency_penalty = static_cast<float>(args.number("frequency-penalty"));
  const int64_t seed = args.integer("seed");  // >= -1: checked by the option's range
  p.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}() & 0xffffffffu;
  validate(p);
  return p;
}

}  // namespace

GenerateParams generation_params(const Args& args, const std::string& model_dir,
                                 const Tokenizer& tokenizer) {
  GenerateParams g;
  g.sampling = sampling_params(args, model_dir);
  g.max_tokens = args.integer("n-predict");
  g.n_ctx = args.integer("ctx-size");
  // The same limit bench and perplexity apply: a context the model cannot address is an error.
  const int64_t max_positions = hparams_from_file(model_dir + "/config.json").max_positions;
  check(g.n_ctx <= max_positions, "-c ", g.n_ctx, " exceeds the model's max_position_embeddings (",
        max_positions, ")");
  if (!args.has("ignore-eos")) g.stop_ids = tokenizer.stop_ids();
  g.stop_strings = args.all("stop");
  for (const std::string& b : args.all("logit-bias")) g.logit_bias.push_back(parse_logit_bias(b));
  validate(g.logit_bias);
  return g;
}

std::string timing_line(const GenerateResult& r) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf, "prefill %s in %.3f s (%.1f tok/s), decode %s in %.3f s (%.1f tok/s)",
      plural(r.n_prefill, "token").c_str(), r.prefill_s, r.prefill_tps(),
      plural(static_cast<int64_t>(r.tokens.size()), "token").c_str(), r.decode_s, r.decode_tps());
  return buf;
}

}  // namespace k3::cli
