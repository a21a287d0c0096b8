// The public parse entry points: a text lexer that finds markers (holding back a possible
// marker prefix at the end of what has arrived), the id path, and StreamParser.
#include <algorithm>

#include "chat/chat_types.h"
#include "chat/parse_machine.h"
#include "k3/chat.h"
#include "tokenizer/utf8.h"

namespace k3::chat {

namespace {

using detail::Marker;
using detail::ParseMachine;

struct MarkerName {
  std::string_view text;
  Marker marker;
};

constexpr MarkerName kMarkers[] = {{kOpen, Marker::open},
                                   {kClose, Marker::close},
                                   {kSep, Marker::sep},
                                   {kEndOfMsg, Marker::end_of_msg}};

const MarkerName* marker_at(std::string_view s, size_t pos) {
  for (const MarkerName& m : kMarkers) {
    if (s.substr(pos, m.text.size()) == m.text) return &m;
  }
  return nullptr;
}

// Length of the longest suffix of s that is a proper prefix of a marker.
size_t partial_marker_suffix(std::string_view s) {
  size_t longest = 0;
  for (const MarkerName& m : kMarkers) {
    for (size_t n = std::min(s.size(), m.text.size() - 1); n > longest; --n) {
      if (s.substr(s.size() - n) == m.text.substr(0, n)) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

class TextLexer {
 public:
  void push(std::string_view text, ParseMachine& machine, ParseDelta& delta) {
    pending_ += text;
    std::string_view s = pending_;
    size_t start = 0;
    for (size_t pos = s.find("<|"); pos != std::string_view::npos; pos = s.find("<|", pos)) {
      const MarkerName* m = marker_at(s, pos);
      if (!m) {
        ++pos;
        continue;
      }
      machine.text(s.substr(start, pos - start), delta);
      machine.marker(m->marker, delta);
      start = pos = pos + m->text.size();
    }
    const size_t keep = partial_marker_suffix(s.substr(start));
    machine.text(s.substr(start, s.size() - start - keep), delta);
    pending_.erase(0, s.size() - keep);
  }

  void finish(ParseMachine& machine, ParseDelta& delta) {
    machine.text(pending_, delta);
    pending_.clear();
    machine.finish(delta);
  }

 private:
  std::string pending_;
};

}  // namespace

Json to_json(const ParsedMessage& message) {
  auto valid = [](const std::string& s) { return tok::utf8_replace_invalid(s); };
  Json out = {{"role", "assistant"}};
  out["content"] = message.content.empty() ? Json() : Json(valid(message.content));
  if (!message.reasoning_content.empty()) {
    out["reasoning_content"] = valid(message.reasoning_content);
  }
  if (!message.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ToolCall& call : message.tool_calls) {
      calls.push_back(to_json(ToolCall{
          .id = valid(call.id), .name = valid(call.name), .arguments = valid(call.arguments)}));
    }
    out["tool_calls"] = std::move(calls);
  }
  return out;
}

std::string message_json(const ParsedMessage& message) {
  return to_json(message).dump(-1, ' ', false, Json::error_handler_t::replace);
}

ParsedMessage parse_output(std::string_view text, const ParseOptions& options) {
  StreamParser parser(options);
  parser.push(text);
  parser.finish();
  return parser.result();
}

ParsedMessage parse_output_ids(const Tokenizer& tok, std::span<const int32_t> ids,
                               const ParseOptions& options) {
  ParsedMessage out;
  ParseDelta delta;
  ParseMachine machine(options, out);
  const std::pair<int32_t, Marker> markers[] = {{tok.special_id(kOpen), Marker::open},
                                                {tok.special_id(kClose), Marker::close},
                                                {tok.special_id(kSep), Marker::sep},
                                                {tok.special_id(kEndOfMsg), Marker::end_of_msg}};
  const std::vector<int32_t> stops = tok.stop_ids();
  std::vector<int32_t> run;
  auto flush = [&] {
    if (!run.empty()) machine.text(tok.decode(run), delta);
    run.clear();
  };
  for (int32_t id : ids) {
    const Marker* marker = nullptr;
    for (const auto& [marker_id, m] : markers) {
      if (id >= 0 && id == marker_id) marker = &m;
    }
    const bool stop = std::find(stops.begin(), stops.end(), id) != stops.end();
    if (!marker && !stop) {
      if (id >= 0 && id < tok.n_vocab()) run.push_back(id);  // never throw on model output
      continue;
    }
    flush();
    machine.marker(marker ? *marker : Marker::end_of_msg, delta);
  }
  flush();
  machine.finish(delta);
  return out;
}

struct StreamParser::State {
  explicit State(const ParseOptions& o) : options(o), machine(options, result) {}
  ParseOptions options;
  ParsedMessage result;
  ParseMachine machine;
  TextLexer lexer;
  bool finished = false;
};

StreamParser::StreamParser(const ParseOptions& options)
    : state_(std::make_unique<State>(options)) {}
StreamParser::~StreamParser() = default;
StreamParser::StreamParser(StreamParser&&) noexcept = default;
StreamParser& StreamParser::operator=(StreamParser&&) noexcept = default;

ParseDelta StreamParser::push(std::string_view text) {
  ParseDelta delta;
  if (!state_->finished) state_->lexer.push(text, state_->machine, delta);
  return delta;
}

ParseDelta StreamParser::finish() {
  ParseDelta delta;
  if (!state_->finished) state_->lexer.finish(state_->machine, delta);
  state_->finished = true;
  return delta;
}

const ParsedMessage& StreamParser::result() const { return state_->result; }

}  // namespace k3::chat
