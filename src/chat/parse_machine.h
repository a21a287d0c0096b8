// Internal to src/chat: the state machine behind parse_output, fed text pieces and markers
// (from the text lexer or from token ids). Rules are listed in k3/chat.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/py_json.h"
#include "chat/xtml.h"
#include "k3/chat.h"

namespace k3::chat::detail {

enum class Marker { open, close, sep, end_of_msg };

class ParseMachine {
 public:
  ParseMachine(const ParseOptions& options, ParsedMessage& out);

  void text(std::string_view text, ParseDelta& delta);
  void marker(Marker m, ParseDelta& delta);
  void finish(ParseDelta& delta);

 private:
  struct Frame {
    std::string tag;
    std::vector<Attr> attrs;
  };
  struct Call {
    std::string name;
    Json arguments = Json::object();
    std::optional<std::string> raw;  // a json block's text
  };
  struct Argument {
    std::string key, type, value;
  };
  enum class Mode { body, open_header, close_header };

  void problem(std::string note);
  void route(std::string_view text, ParseDelta& delta);
  void flush_loose(ParseDelta& delta);
  void open(std::string_view header);
  void close(std::string_view header, ParseDelta& delta);
  void close_all(ParseDelta& delta);
  void finalize(const Frame& frame, ParseDelta& delta);
  void finish_call(ParseDelta& delta);

  const ParseOptions& options_;
  ParsedMessage& out_;
  Mode mode_ = Mode::body;
  std::string header_;
  std::string loose_;      // text outside any channel, held until the next marker
  std::string loose_tag_;  // the tag it is directly inside: message, tools or call
  std::vector<Frame> stack_;
  std::optional<Call> call_;
  std::optional<Argument> arg_;
  std::optional<std::string> json_;
  bool fresh_ = true;   // nothing seen yet but (possibly) the generation prompt's own tags
  bool ended_ = false;  // the message was closed or <|end_of_msg|> came
  bool noted_trailing_ = false;
};

}  // namespace k3::chat::detail
