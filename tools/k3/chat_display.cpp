#include "chat_display.h"

namespace k3::cli {
namespace {

constexpr const char* kDim = "\x1b[2m";
constexpr const char* kReset = "\x1b[0m";

}  // namespace

ChatDisplay::ChatDisplay(std::FILE* out, bool color, bool thinking)
    : out_(out), color_(color), parser_({.thinking = thinking}) {}

void ChatDisplay::write(std::string_view s) { std::fwrite(s.data(), 1, s.size(), out_); }

void ChatDisplay::set_think(bool on) {
  if (on == in_think_) return;
  in_think_ = on;
  if (color_) {
    write(on ? kDim : kReset);
    if (!on) write("\n\n");
  } else {
    write(on ? "<think>\n" : "\n</think>\n\n");
  }
}

void ChatDisplay::render(const chat::ParseDelta& d) {
  if (!d.reasoning_content.empty()) {
    set_think(true);
    write(d.reasoning_content);
  }
  if (!d.content.empty()) {
    set_think(false);
    write(d.content);
  }
  for (const chat::ToolCall& call : d.tool_calls) {
    set_think(false);
    write("\n[tool call ");
    write(call.name);
    write(" ");
    write(call.arguments);
    write("]\n");
  }
  std::fflush(out_);
}

void ChatDisplay::push(std::string_view text) { render(parser_.push(text)); }

const chat::ParsedMessage& ChatDisplay::finish() {
  render(parser_.finish());
  set_think(false);
  std::fflush(out_);
  return parser_.result();
}

}  // namespace k3::cli
