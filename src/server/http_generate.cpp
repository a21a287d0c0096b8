// POST /v1/chat/completions and /v1/completions: parse, submit to the scheduler, answer whole
// or as an SSE stream. A request whose client is gone (a failed or refused write while
// streaming, a closed socket while a whole answer is generated) is cancelled: the scheduler
// frees its sequence at its next step.
#include <chrono>
#include <ctime>

#include "server/http_server.h"

namespace k3::server {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// One answer in the making: the request, its channel and what the events became so far.
struct Answer {
  Answer(HttpContext& c, ApiRequest r, bool is_chat)
      : ctx(c),
        req(std::move(r)),
        chat(is_chat),
        channel(std::make_shared<RequestChannel>(req.gen)),
        parser(c.tok, req.thinking, req.logprobs),
        id(new_id(is_chat ? "chatcmpl-" : "cmpl-")),
        created(static_cast<int64_t>(std::time(nullptr))) {}

  json envelope(const char* object) const {
    return {{"id", id}, {"object", object}, {"created", created}, {"model", ctx.opt.model_name}};
  }
  // Legacy completions logprobs of these events, appended to `lp`.
  void completion_logprobs(const std::vector<TokenEvent>& events, json& lp) {
    for (const TokenEvent& e : events) {
      if (e.id < 0) continue;
      lp["tokens"].push_back(std::string(ctx.tok.token_to_piece(e.id)));
      lp["token_logprobs"].push_back(e.chosen.logprob);
      json top = json::object();
      for (const TokenLogprob& t : e.top)
        top[std::string(ctx.tok.token_to_piece(t.id))] = t.logprob;
      lp["top_logprobs"].push_back(top);
      lp["text_offset"].push_back(text_offset);
      text_offset += static_cast<int64_t>(ctx.tok.token_to_piece(e.id).size());
    }
  }

  HttpContext& ctx;
  ApiRequest req;
  bool chat;
  std::shared_ptr<RequestChannel> channel;
  ChatAnswer parser;
  std::string id;
  int64_t created;
  int64_t text_offset = 0;
  std::string text;  // completions: all text
  bool sent_role = false, finished = false;
};

void check_finish(const Finish& f) {
  if (f.reason == "error") throw ApiError(500, "generation failed: " + f.error, "", "server_error");
}

void answer_whole(Answer& a, httplib::Response& res) {
  std::vector<TokenEvent> events;
  std::optional<Finish> fin;
  bool client_gone = false;
  while (!(fin = a.channel->wait(events, kPoll))) {
    // Nothing is written before the end, so look at the socket: a client that hung up cancels
    // its request (the scheduler frees the sequence at its next step).
    if (!client_gone && !client_connected()) {
      client_gone = true;
      a.channel->cancel();
    }
  }
  if (client_gone && fin->reason == "cancelled")  // nobody reads it; counted in /metrics
    throw ApiError(499, "the client closed the connection", "", "client_closed_request");
  check_finish(*fin);
  json lp = a.chat ? json::array() : json::object();
  json out;
  if (a.chat) {
    a.parser.push(events, lp);
    a.parser.finish_delta();
    json choice = {{"index", 0},
                   {"message", a.parser.message()},
                   {"logprobs", nullptr},
                   {"finish_reason", finish_reason(*fin, a.parser.has_tool_calls())}};
    if (a.req.logprobs) choice["logprobs"] = {{"content", lp}};
    out = a.envelope("chat.completion");
    out["choices"] = json::array({choice});
  } else {
    for (const TokenEvent& e : events) a.text += e.text;
    if (a.req.logprobs) a.completion_logprobs(events, lp);
    json choice = {{"index", 0},
                   {"text", a.text},
                   {"logprobs", a.req.logprobs ? lp : json(nullptr)},
                   {"finish_reason", finish_reason(*fin, false)}};
    out = a.envelope("text_completion");
    out["choices"] = json::array({choice});
  }
  out["usage"] = usage_json(*fin);
  res.set_content(dump(out), "application/json");
}

bool write_event(httplib::DataSink& sink, const json& chunk) {
  const std::string s = "data: " + dump(chunk) + "\n\n";
  return sink.write(s.data(), s.size());
}

// One SSE chunk with one choice (delta or text) and its finish reason (null while running).
json chunk_of(Answer& a, json body, json logprobs, json finish) {
  json c = a.envelope(a.chat ? "chat.completion.chunk" : "text_completion");
  body["index"] = 0;
  body["logprobs"] = std::move(logprobs);
  body["finish_reason"] = std::move(finish);
  c["choices"] = json::array({body});
  if (a.req.include_usage) c["usage"] = nullptr;
  return c;
}

// Sends one chunk per token as OpenAI does (text held back by the parser or the stop strings
// goes out with a later token); returns false when the client is gone.
bool stream_event(Answer& a, const TokenEvent& e, httplib::DataSink& sink) {
  if (a.chat) {
    json lp = json::array();
    json delta = a.parser.push({e}, lp);
    if (delta.is_null() && lp.empty()) return true;
    if (delta.is_null()) delta = json::object();
    return write_event(sink,
                       chunk_of(a, {{"delta", delta}},
                                a.req.logprobs ? json{{"content", lp}} : json(nullptr), nullptr));
  }
  json lp = json::object();
  if (a.req.logprobs) a.completion_logprobs({e}, lp);
  return write_event(sink,
                     chunk_of(a, {{"text", e.text}}, a.req.logprobs ? lp : json(nullptr), nullptr));
}

bool stream_finish(Answer& a, const Finish& f, httplib::DataSink& sink) {
  if (f.reason == "error") {
    json err = {
        {"error", {{"message", "generation failed: " + f.error}, {"type", "server_error"}}}};
    return write_event(sink, err);
  }
  bool ok = true;
  if (a.chat) {
    json tail = a.parser.finish_delta();
    if (!tail.is_null()) ok = write_event(sink, chunk_of(a, {{"delta", tail}}, nullptr, nullptr));
    ok = ok && write_event(sink, chunk_of(a, {{"delta", json::object()}}, nullptr,
                                          finish_reason(f, a.parser.has_tool_calls())));
  } else {
    ok = write_event(sink, chunk_of(a, {{"text", ""}}, nullptr, finish_reason(f, false)));
  }
  if (ok && a.req.include_usage) {
    json u = a.envelope(a.chat ? "chat.completion.chunk" : "text_completion");
    u["choices"] = json::array();
    u["usage"] = usage_json(f);
    ok = write_event(sink, u);
  }
  static const char kDone[] = "data: [DONE]\n\n";
  return ok && sink.write(kDone, sizeof kDone - 1);
}

void answer_stream(std::shared_ptr<Answer> a, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [a](size_t, httplib::DataSink& sink) {
        if (a->finished) return false;
        if (a->chat && !a->sent_role) {
          a->sent_role = true;
          if (!write_event(sink, chunk_of(*a, {{"delta", {{"role", "assistant"}, {"content", ""}}}},
                                          nullptr, nullptr)))
            return false;
        }
        std::vector<TokenEvent> events;
        const std::optional<Finish> fin = a->channel->wait(events, kPoll);
        for (const TokenEvent& e : events)
          if (!stream_event(*a, e, sink)) return false;
        if (!fin) return sink.is_writable();
        a->finished = true;
        if (!stream_finish(*a, *fin, sink)) return false;
        sink.done();
        return true;
      },
      [a](bool success) {
        if (!success) a->channel->cancel();  // the client went away (or the write failed)
      });
}

}  // namespace

void handle_generate(HttpContext& ctx, const httplib::Request& req, httplib::Response& res,
                     bool chat) {
  ApiRequest r = parse_request_body(req.body, chat, ctx.tok, ctx.limits);
  auto a = std::make_shared<Answer>(ctx, std::move(r), chat);
  switch (ctx.scheduler.submit(a->channel)) {
    case Admit::ok:
      break;
    case Admit::full:
      res.set_header("Retry-After", "1");
      throw ApiError(429,
                     "the server is busy: every sequence is running and the queue is full; "
                     "retry later",
                     "", "rate_limit_error", "server_busy");
    case Admit::draining:
      throw ApiError(503, "the server is shutting down", "", "server_error", "shutting_down");
  }
  if (a->req.stream) {
    answer_stream(a, res);
  } else {
    answer_whole(*a, res);
  }
}

}  // namespace k3::server
