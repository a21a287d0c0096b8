// The OpenAI API on top of the scheduler: request bodies to GenRequests (every field checked,
// a clear 4xx message naming the field otherwise), and scheduler events back to OpenAI JSON:
// whole responses, SSE chunks, logprobs, usage, tool calls, reasoning_content.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "k3/chat.h"
#include "k3/tokenizer.h"
#include "server/request.h"

namespace k3::server {

using json = nlohmann::json;

// An error the client caused (or a refusal): its HTTP status and OpenAI error fields.
struct ApiError : std::runtime_error {
  ApiError(int status_, std::string message, std::string param_ = "",
           std::string type_ = "invalid_request_error", std::string code_ = "")
      : std::runtime_error(message),
        status(status_),
        param(std::move(param_)),
        type(std::move(type_)),
        code(std::move(code_)) {}
  int status;
  std::string param, type, code;
};

std::string error_body(const ApiError& e);  // {"error": {message, type, param, code}}

struct ApiLimits {
  int64_t n_ctx = 4096;
  std::string model_name = "k3";
};

// A parsed request: what to generate and how to answer.
struct ApiRequest {
  GenRequest gen;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  bool thinking = true;  // chat: the prompt opened the think channel
  std::string model;
};

// Throws ApiError (400) naming the first bad field. `raw` is the body text (the chat encoder
// reads the messages from it).
ApiRequest parse_chat_request(const json& body, const std::string& raw, const Tokenizer& tok,
                              const ApiLimits& limits);
ApiRequest parse_completion_request(const json& body, const Tokenizer& tok,
                                    const ApiLimits& limits);
// The body text of POST /v1/chat/completions (chat) or /v1/completions: the JSON, then the
// fields above. Throws ApiError (400) only (tests/fuzz/fuzz_server_request.cpp checks that).
ApiRequest parse_request_body(const std::string& body, bool chat, const Tokenizer& tok,
                              const ApiLimits& limits);

// Turns a chat request's token events into OpenAI deltas (reasoning, content, completed tool
// calls) and, at the end, the whole assistant message. Used by both the streaming and the
// non-streaming answer, so the two always agree.
class ChatAnswer {
 public:
  ChatAnswer(const Tokenizer& tok, bool thinking, bool logprobs);
  // The delta object (and its logprobs "content" entries) for these events; null when empty.
  json push(const std::vector<TokenEvent>& events, json& logprobs_out);
  json finish_delta();   // what the parser held back
  json message() const;  // {"role": "assistant", "content", "reasoning_content", "tool_calls"}
  bool has_tool_calls() const { return n_calls_ > 0; }

 private:
  json delta_of(const chat::ParseDelta& d);
  const Tokenizer& tok_;
  bool logprobs_;
  chat::StreamParser parser_;
  int n_calls_ = 0;
};

json logprob_entry(const Tokenizer& tok, const TokenEvent& e);  // chat logprobs.content item
std::string finish_reason(const Finish& f, bool tool_calls);
json usage_json(const Finish& f);
std::string new_id(const char* prefix);  // "chatcmpl-<random hex>"

}  // namespace k3::server
