// The server's request parsing (src/server/openai.cpp) on arbitrary bytes: the body of
// POST /v1/chat/completions and of /v1/completions (each input is tried as both), JSON text ->
// ApiRequest, with the fixture tokenizer. Properties:
//  - a rejection is an ApiError with a 4xx status and a message, and its error body is JSON;
//    nothing else is thrown (a k3::Error or a nlohmann exception would be a 500);
//  - an accepted request has a prompt of valid ids that fits the context, sampling parameters
//    and logit biases the sampler accepts (k3::validate) within the documented ranges, at most
//    16 stop strings, logprobs in range, and stream_options only with a stream.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/fuzz_common.h"
#include "k3/error.h"
#include "k3/sampler.h"
#include "k3/tokenizer.h"
#include "server/openai.h"

namespace {

using k3::fuzz::require;
using k3::server::ApiError;
using k3::server::ApiLimits;
using k3::server::ApiRequest;

void check_rejection(const ApiError& e) {
  require(e.status >= 400 && e.status < 500, "a rejection is a 4xx");
  require(e.what()[0] != '\0', "a rejection has a message");
  const nlohmann::json body = nlohmann::json::parse(k3::server::error_body(e), nullptr, false);
  require(!body.is_discarded() && body["error"]["message"].is_string(), "error body is JSON");
}

void check_accepted(const ApiRequest& r, bool chat, const k3::Tokenizer& tok,
                    const ApiLimits& limits) {
  const k3::server::GenRequest& g = r.gen;
  require(!g.prompt.empty(), "the prompt is not empty");
  require(static_cast<int64_t>(g.prompt.size()) < limits.n_ctx, "the prompt fits the context");
  for (int32_t id : g.prompt) require(id >= 0 && id < tok.n_vocab(), "prompt ids are in range");
  try {
    k3::validate(g.sampling);
    k3::validate(g.logit_bias);
  } catch (const k3::Error& e) {
    std::fprintf(stderr, "sampler refuses an accepted request: %s\n", e.what());
    require(false, "the sampler accepts what the server accepted");
  }
  const k3::SamplingParams& s = g.sampling;
  require(s.temperature >= 0 && s.temperature <= 2, "temperature in [0, 2]");
  require(s.top_k >= 0 && s.top_k <= tok.n_vocab(), "top_k in [0, n_vocab]");
  require(std::abs(s.presence_penalty) <= 2 && std::abs(s.frequency_penalty) <= 2,
          "penalties in [-2, 2]");
  for (auto [id, bias] : g.logit_bias) {
    require(id >= 0 && id < tok.n_vocab(), "logit_bias ids are in range");
    require(bias >= -100 && bias <= 100, "logit_bias values in [-100, 100]");
  }
  require(g.max_tokens == -1 || g.max_tokens >= 1, "max_tokens is -1 or positive");
  require(g.stop.size() <= 16, "at most 16 stop strings");
  require(g.top_logprobs >= -1 && g.top_logprobs <= 20, "top_logprobs in [-1, 20]");
  require(r.logprobs == (g.top_logprobs >= 0), "logprobs iff top_logprobs >= 0");
  require(!r.include_usage || r.stream, "include_usage only with a stream");
  require(chat || r.thinking, "completions never open the think channel");
}

void parse_one(const std::string& body, bool chat, const k3::Tokenizer& tok,
               const ApiLimits& limits) {
  try {
    const ApiRequest r = k3::server::parse_request_body(body, chat, tok, limits);
    check_accepted(r, chat, tok, limits);
  } catch (const ApiError& e) {
    check_rejection(e);
  } catch (const std::exception& e) {  // a finding: the server would answer 500
    std::fprintf(stderr, "%s request: exception other than ApiError: %s\n",
                 chat ? "chat" : "completion", e.what());
    require(false, "only ApiError escapes the request parser");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const k3::Tokenizer tok = k3::Tokenizer::load(k3::fuzz::tokenizer_dir());
  const std::string body(reinterpret_cast<const char*>(data), size);
  // A small context on odd sizes, so that the context check is reached by ordinary prompts too.
  const ApiLimits limits{.n_ctx = size % 2 ? 48 : 4096, .model_name = "k3"};
  parse_one(body, true, tok, limits);
  parse_one(body, false, tok, limits);
  return 0;
}
