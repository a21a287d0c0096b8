// Shows the model's chat output as it streams, for people. k3/chat.h's StreamParser splits the
// output into reasoning, content and tool calls; the reasoning is printed dim on a terminal (or
// between <think> and </think> lines otherwise), the content as it is, each tool call as one
// "[tool call NAME ARGUMENTS]" line. finish() returns the parsed assistant message.
#pragma once

#include <cstdio>
#include <string_view>

#include "k3/chat.h"

namespace k3::cli {

class ChatDisplay {
 public:
  // thinking: the generation prompt ended with an open think tag.
  ChatDisplay(std::FILE* out, bool color, bool thinking);
  void push(std::string_view text);
  const chat::ParsedMessage& finish();

 private:
  void render(const chat::ParseDelta& d);
  void set_think(bool on);
  void write(std::string_view s);

  std::FILE* out_;
  bool color_;
  bool in_think_ = false;
  chat::StreamParser parser_;
};

}  // namespace k3::cli
