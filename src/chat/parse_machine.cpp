#include "chat/parse_machine.h"

#include <utility>

#include "chat/chat_render.h"
#include "core/error.h"
#include "k3/json_depth.h"

namespace k3::chat::detail {

namespace {

constexpr size_t kMaxProblems = 20;

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ascii_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ascii_space(s.back())) s.remove_suffix(1);
  return s;
}

// Reverses escape_attr: &quot; -> ", &amp; -> & (one pass, so "&amp;quot;" -> "&quot;").
std::string unescape_attr(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.substr(i, 6) == "&quot;") {
      out += '"';
      i += 5;
    } else if (s.substr(i, 5) == "&amp;") {
      out += '&';
      i += 4;
    } else {
      out += s[i];
    }
  }
  return out;
}

// `tag key="value" key="value"`; returns false (keeping what parsed) on malformed attributes.
bool parse_header(std::string_view h, std::string& tag, std::vector<Attr>& attrs) {
  h = trim(h);
  size_t i = 0;
  while (i < h.size() && !is_ascii_space(h[i])) ++i;
  tag = std::string(h.substr(0, i));
  while (true) {
    while (i < h.size() && is_ascii_space(h[i])) ++i;
    if (i == h.size()) return true;
    const size_t eq = h.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= h.size() || h[eq + 1] != '"') return false;
    const size_t end = h.find('"', eq + 2);
    if (end == std::string_view::npos) return false;
    attrs.emplace_back(std::string(trim(h.substr(i, eq - i))),
                       unescape_attr(h.substr(eq + 2, end - eq - 2)));
    i = end + 1;
  }
}

std::string attr(const std::vector<Attr>& attrs, std::string_view key, std::string fallback) {
  for (const auto& [k, v] : attrs) {
    if (k == key) return v;
  }
  return fallback;
}

}  // namespace

ParseMachine::ParseMachine(const ParseOptions& options, ParsedMessage& out)
    : options_(options), out_(out) {
  stack_.push_back({"message", {{"role", "assistant"}}});
  stack_.push_back({options.thinking ? "think" : "response", {}});
}

void ParseMachine::problem(std::string note) {
  if (out_.problems.size() < kMaxProblems) {
    out_.problems.push_back(std::move(note));
  } else if (out_.problems.size() == kMaxProblems) {
    out_.problems.push_back("(further problems not listed)");
  }
}

void ParseMachine::text(std::string_view text, ParseDelta& delta) {
  if (text.empty()) return;
  if (ended_) {
    if (!noted_trailing_ && !is_blank(text)) problem("text after the end of the message ignored");
    noted_trailing_ = noted_trailing_ || !is_blank(text);
    return;
  }
  if (mode_ != Mode::body) {
    header_ += text;
    return;
  }
  fresh_ = false;
  route(text, delta);
}

void ParseMachine::route(std::string_view text, ParseDelta& delta) {
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
    const std::string& tag = it->tag;
    if (tag == "think") {
      out_.reasoning_content += text;
      delta.reasoning_content += text;
    } else if (tag == "response") {
      out_.content += text;
      delta.content += text;
    } else if (tag == "argument") {
      if (arg_) arg_->value += text;
    } else if (tag == "json") {
      if (json_) *json_ += text;
    } else if (tag == "tools" || tag == "call" || tag == "message") {
      loose_ += text;  // judged at the next marker, so chunking cannot change the outcome
      loose_tag_ = tag;
    } else {
      continue;  // an unknown tag: its text belongs to the enclosing channel
    }
    return;
  }
  loose_ += text;  // no tag open at all
  loose_tag_ = "message";
}

void ParseMachine::flush_loose(ParseDelta& delta) {
  if (is_blank(loose_)) {
    // whitespace between structural tags carries nothing
  } else if (loose_tag_ == "message") {
    problem("text outside the think/response channels taken as content");
    out_.content += loose_;
    delta.content += loose_;
  } else {
    problem(cat("text directly inside <", loose_tag_, "> ignored"));
  }
  loose_.clear();
}

void ParseMachine::marker(Marker m, ParseDelta& delta) {
  flush_loose(delta);
  if (ended_) return;
  if (m == Marker::sep) {
    if (mode_ == Mode::open_header) {
      open(header_);
    } else if (mode_ == Mode::close_header) {
      close(header_, delta);
    } else {
      problem("stray <|sep|> ignored");
    }
    mode_ = Mode::body;
    return;
  }
  if (mode_ != Mode::body) problem(cat("tag header \"", header_, "\" cut off by a marker"));
  mode_ = Mode::body;
  header_.clear();
  if (m == Marker::open) mode_ = Mode::open_header;
  if (m == Marker::close) mode_ = Mode::close_header;
  if (m == Marker::end_of_msg) {
    close_all(delta);
    out_.complete = true;
    ended_ = true;
  }
}

void ParseMachine::open(std::string_view header) {
  Frame frame;
  if (!parse_header(header, frame.tag, frame.attrs)) {
    problem(cat("malformed attributes in <", header, ">"));
  }
  if (frame.tag.empty()) {
    problem("open tag without a name ignored");
    return;
  }
  if (fresh_ && frame.tag == "message") {
    stack_.clear();  // the output starts with the generation prompt
    stack_.push_back(std::move(frame));
    return;
  }
  if (fresh_ && !stack_.empty() && frame.tag == stack_.back().tag) {
    fresh_ = false;
    return;  // the prompt's own <think> or <response>
  }
  fresh_ = false;
  if (frame.tag == "call") {
    if (call_) problem("<call> opened inside a <call>");
    call_ = Call();  // not emplace(): clang 14 rejects it for a nested type with member defaults
    call_->name = attr(frame.attrs, "tool", "");
  } else if (frame.tag == "argument") {
    if (!call_) problem("<argument> outside a <call>");
    arg_.emplace();
    arg_->key = attr(frame.attrs, "key", "");
    arg_->type = attr(frame.attrs, "type", "");
  } else if (frame.tag == "json") {
    if (!call_) problem("<json> outside a <call>");
    json_ = std::string();
  }
  stack_.push_back(std::move(frame));
}

void ParseMachine::close(std::string_view header, ParseDelta& delta) {
  fresh_ = false;
  const std::string tag(trim(header));
  size_t at = stack_.size();
  while (at > 0 && stack_[at - 1].tag != tag) --at;
  if (at == 0) {
    problem(cat("close tag </", tag, "> without an open tag ignored"));
    return;
  }
  // stack_[at - 1] is the tag being closed; anything above it was left open.
  while (stack_.size() >= at) {
    Frame inner = std::move(stack_.back());
    stack_.pop_back();
    if (stack_.size() >= at) problem(cat("<", inner.tag, "> was not closed"));
    finalize(inner, delta);
  }
}

void ParseMachine::close_all(ParseDelta& delta) {
  while (!stack_.empty()) {
    Frame inner = std::move(stack_.back());
    stack_.pop_back();
    if (inner.tag != "message") problem(cat("<", inner.tag, "> was not closed"));
    finalize(inner, delta);
  }
}

void ParseMachine::finalize(const Frame& frame, ParseDelta& delta) {
  if (frame.tag == "argument" && arg_) {
    Argument arg = std::move(*arg_);
    arg_.reset();
    if (!call_) return;
    Json value = arg.value;
    if (!arg.type.empty() && arg.type != "string") {
      // Too deep to print back safely counts as invalid: kept as the string it was.
      if (json_too_deep_at(arg.value) == std::string_view::npos) {
        value = Json::parse(arg.value, nullptr, /*allow_exceptions=*/false);
      } else {
        value = Json(Json::value_t::discarded);
      }
      if (value.is_discarded()) {
        problem(cat("argument \"", arg.key, "\" of type ", arg.type,
                    " is not valid JSON; kept as a string"));
        value = arg.value;
      }
    }
    call_->arguments[arg.key] = std::move(value);
  } else if (frame.tag == "json" && json_) {
    if (call_) call_->raw = std::move(*json_);
    json_.reset();
  } else if (frame.tag == "call" && call_) {
    finish_call(delta);
  } else if (frame.tag == "message") {
    out_.complete = true;
    ended_ = true;
  }
}

void ParseMachine::finish_call(ParseDelta& delta) {
  Call call = std::move(*call_);
  call_.reset();
  if (call.name.empty()) {
    problem("tool call without a tool name dropped");
    return;
  }
  ToolCall tc{.id = cat(options_.tool_call_id_prefix, out_.tool_calls.size()),
              .name = call.name,
              .arguments = call.raw ? *call.raw : py_dumps(call.arguments, JsonSeparators::python)};
  out_.tool_calls.push_back(tc);
  delta.tool_calls.push_back(std::move(tc));
}

void ParseMachine::finish(ParseDelta& delta) {
  flush_loose(delta);
  if (ended_) return;
  if (mode_ != Mode::body) problem(cat("output ended inside the tag header \"", header_, "\""));
  mode_ = Mode::body;
  problem("output ended before the message was closed");
  if (call_) problem(cat("unfinished tool call \"", call_->name, "\" dropped"));
  call_.reset();
  ended_ = true;
}

}  // namespace k3::chat::detail
