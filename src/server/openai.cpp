#include "server/openai.h"

#include <random>

#include "k3/error.h"

namespace k3::server {
namespace {

const char* type_name(const json& v) { return v.type_name(); }

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

bool present(const json& b, const char* key) { return b.contains(key) && !b[key].is_null(); }

double number(const json& b, const char* key, double lo, double hi, double def) {
  if (!present(b, key)) return def;
  const json& v = b[key];
  if (!v.is_number()) bad(key, cat("'", key, "' must be a number, got ", type_name(v)));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    bad(key, cat("'", key, "' must be within [", lo, ", ", hi, "], got ", x));
  return x;
}

int64_t integer(const json& b, const char* key, int64_t lo, int64_t hi, int64_t def) {
  if (!present(b, key)) return def;
  const json& v = b[key];
  if (!v.is_number_integer()) bad(key, cat("'", key, "' must be an integer, got ", type_name(v)));
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)
                        ? INT64_MAX
                        : v.get<int64_t>();
  if (x < lo || x > hi) bad(key, cat("'", key, "' must be within [", lo, ", ", hi, "], got ", x));
  return x;
}

bool boolean(const json& b, const char* key, bool def) {
  if (!present(b, key)) return def;
  if (!b[key].is_boolean()) bad(key, cat("'", key, "' must be a boolean, got ", type_name(b[key])));
  return b[key].get<bool>();
}

std::vector<std::string> stop_list(const json& b) {
  if (!present(b, "stop")) return {};
  const json& v = b["stop"];
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array())
    bad("stop", cat("'stop' must be a string or an array of strings, got ", type_name(v)));
  if (v.size() > 16) bad("stop", cat("'stop' holds ", v.size(), " strings; at most 16"));
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) bad("stop", "'stop' must hold strings only");
    out.push_back(s.get<std::string>());
  }
  return out;
}

LogitBias logit_bias(const json& b, int32_t n_vocab) {
  LogitBias out;
  if (!present(b, "logit_bias")) return out;
  const json& v = b["logit_bias"];
  if (!v.is_object()) bad("logit_bias", "'logit_bias' must be an object of token id -> bias");
  for (const auto& [k, bias] : v.items()) {
    size_t used = 0;
    long id = -1;
    try {
      id = std::stol(k, &used);
    } catch (const std::exception&) {
    }
    if (used != k.size() || id < 0 || id >= n_vocab)
      bad("logit_bias", cat("'logit_bias' key '", k, "' is not a token id in [0, ", n_vocab, ")"));
    if (!bias.is_number() || bias.get<double>() < -100 || bias.get<double>() > 100)
      bad("logit_bias", cat("'logit_bias' value for ", k, " must be a number in [-100, 100]"));
    out.emplace_back(static_cast<int32_t>(id), bias.get<float>());
  }
  return out;
}

// The fields chat and completions share.
ApiRequest common_fields(const json& b, const Tokenizer& tok) {
  if (!b.is_object()) bad("", cat("the request body must be a JSON object, got ", type_name(b)));
  ApiRequest r;
  if (present(b, "model") && !b["model"].is_string()) bad("model", "'model' must be a string");
  r.model = present(b, "model") ? b["model"].get<std::string>() : "";
  if (const int64_t n = integer(b, "n", 1, INT64_MAX, 1); n != 1)
    bad("n", cat("'n' must be 1 (one choice per request), got ", n));
  SamplingParams& s = r.gen.sampling;
  s.temperature = static_cast<float>(number(b, "temperature", 0, 2, 1.0));
  s.top_p = static_cast<float>(number(b, "top_p", 0, 1, 1.0));
  if (s.top_p <= 0) bad("top_p", "'top_p' must be within (0, 1]");
  s.top_k = static_cast<int32_t>(integer(b, "top_k", 0, tok.n_vocab(), 0));
  s.min_p = static_cast<float>(number(b, "min_p", 0, 1, 0));
  s.presence_penalty = static_cast<float>(number(b, "presence_penalty", -2, 2, 0));
  s.frequency_penalty = static_cast<float>(number(b, "frequency_penalty", -2, 2, 0));
  s.repeat_penalty = static_cast<float>(number(b, "repetition_penalty", 0.01, 10, 1));
  s.seed = static_cast<uint64_t>(integer(b, "seed", INT64_MIN, INT64_MAX, 0));
  int64_t max_tokens = integer(b, "max_tokens", 1, INT64_MAX, -1);
  max_tokens = integer(b, "max_completion_tokens", 1, INT64_MAX, max_tokens);
  r.gen.max_tokens = max_tokens;
  r.gen.stop = stop_list(b);
  r.gen.logit_bias = logit_bias(b, tok.n_vocab());
  r.stream = boolean(b, "stream", false);
  if (present(b, "stream_options")) {
    const json& so = b["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed with \"stream\": true");
    r.include_usage = boolean(so, "include_usage", false);
  }
  r.gen.use_prefix_cache = boolean(b, "cache_prompt", true);  // llama-server's name
  return r;
}

void check_prompt(const ApiRequest& r, const ApiLimits& limits, const char* param) {
  const int64_t n = static_cast<int64_t>(r.gen.prompt.size());
  if (n == 0) bad(param, "the prompt is empty");
  if (n >= limits.n_ctx)
    throw ApiError(400,
                   cat("the prompt has ", n, " tokens; this server's context is ", limits.n_ctx,
                       " tokens (prompt and completion together)"),
                   param, "invalid_request_error", "context_length_exceeded");
}

}  // namespace

std::string error_body(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

ApiRequest parse_chat_request(const json& body, const std::string& raw, const Tokenizer& tok,
                              const ApiLimits& limits) {
  ApiRequest r = common_fields(body, tok);
  if (!present(body, "messages") || !body["messages"].is_array() || body["messages"].empty())
    bad("messages", "'messages' must be a non-empty array of messages");
  r.logprobs = boolean(body, "logprobs", false);
  const int64_t top = integer(body, "top_logprobs", 0, 20, 0);
  if (present(body, "top_logprobs") && !r.logprobs)
    bad("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
  r.gen.top_logprobs = r.logprobs ? static_cast<int32_t>(top) : -1;
  if (present(body, "response_format")) {
    const json& f = body["response_format"];
    if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
      bad("response_format", "'response_format' must be an object with a string 'type'");
    const std::string t = f["type"].get<std::string>();
    if (t != "text" && t != "json_object" && t != "json_schema")
      bad("response_format", cat("'response_format.type' must be text, json_object or "
                                 "json_schema, got '",
                                 t, "'"));
    r.gen.json_object = t != "text";  // json_schema: an object, the schema itself not enforced
  }
  chat::Options opt;
  if (present(body, "chat_template_kwargs")) {
    const json& k = body["chat_template_kwargs"];
    if (!k.is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    opt.thinking = boolean(k, "thinking", true);
  }
  if (present(body, "reasoning_effort")) {
    const json& e = body["reasoning_effort"];
    const std::string v = e.is_string() ? e.get<std::string>() : "";
    if (v == "none") {
      opt.thinking = false;
    } else if (v == "low" || v == "high" || v == "max") {
      opt.thinking_effort = v;
    } else {
      bad("reasoning_effort", "'reasoning_effort' must be none, low, high or max");
    }
  }
  r.thinking = r.gen.thinking = opt.thinking;
  try {
    r.gen.prompt = chat::encode_chat_json(tok, raw, opt);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
  check_prompt(r, limits, "messages");
  return r;
}

ApiRequest parse_completion_request(const json& body, const Tokenizer& tok,
                                    const ApiLimits& limits) {
  ApiRequest r = common_fields(body, tok);
  const int64_t lp = integer(body, "logprobs", 0, 20, -1);
  r.logprobs = lp >= 0;
  r.gen.top_logprobs = static_cast<int32_t>(lp);
  if (boolean(body, "echo", false)) bad("echo", "'echo' is not supported");
  if (!present(body, "prompt")) bad("prompt", "'prompt' is required");
  const json& p = body["prompt"];
  if (p.is_string()) {
    try {
      r.gen.prompt = tok.encode(p.get<std::string>());
    } catch (const Error& e) {
      bad("prompt", e.what());
    }
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    for (const json& id : p) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok.n_vocab())
        bad("prompt", cat("'prompt' token ids must be integers in [0, ", tok.n_vocab(), ")"));
      r.gen.prompt.push_back(id.get<int32_t>());
    }
  } else {
    bad("prompt", "'prompt' must be a string or an array of token ids (one prompt; n=1)");
  }
  check_prompt(r, limits, "prompt");
  return r;
}

ApiRequest parse_request_body(const std::string& body, bool chat, const Tokenizer& tok,
                              const ApiLimits& limits) {
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
  return chat ? parse_chat_request(parsed, body, tok, limits)
              : parse_completion_request(parsed, tok, limits);
}

ChatAnswer::ChatAnswer(const Tokenizer& tok, bool thinking, bool logprobs)
    : tok_(tok), logprobs_(logprobs), parser_(chat::ParseOptions{.thinking = thinking}) {}

json ChatAnswer::delta_of(const chat::ParseDelta& d) {
  if (d.empty()) return nullptr;
  json delta = json::object();
  if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
  if (!d.content.empty()) delta["content"] = d.content;
  for (const chat::ToolCall& c : d.tool_calls) {
    delta["tool_calls"].push_back({{"index", n_calls_++},
                                   {"id", c.id},
                                   {"type", "function"},
                                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return delta;
}

json ChatAnswer::push(const std::vector<TokenEvent>& events, json& logprobs_out) {
  std::string text;
  for (const TokenEvent& e : events) {
    text += e.text;
    if (logprobs_ && e.id >= 0) logprobs_out.push_back(logprob_entry(tok_, e));
  }
  return delta_of(parser_.push(text));
}

json ChatAnswer::finish_delta() { return delta_of(parser_.finish()); }

json ChatAnswer::message() const { return json::parse(chat::message_json(parser_.result())); }

json logprob_entry(const Tokenizer& tok, const TokenEvent& e) {
  auto one = [&](const TokenLogprob& t) {
    const std::string_view piece = tok.token_to_piece(t.id);
    json bytes = json::array();
    for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
    return json{{"token", std::string(piece)}, {"logprob", t.logprob}, {"bytes", bytes}};
  };
  json entry = one(e.chosen);
  entry["top_logprobs"] = json::array();
  for (const TokenLogprob& t : e.top) entry["top_logprobs"].push_back(one(t));
  return entry;
}

std::string finish_reason(const Finish& f, bool tool_calls) {
  if (f.reason == "length") return "length";
  return tool_calls ? "tool_calls" : "stop";
}

json usage_json(const Finish& f) {
  return {{"prompt_tokens", f.prompt_tokens},
          {"completion_tokens", f.completion_tokens},
          {"total_tokens", f.prompt_tokens + f.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", f.cached_tokens}}}};
}

std::string new_id(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

}  // namespace k3::server
