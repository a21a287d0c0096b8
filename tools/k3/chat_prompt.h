// The chat format for k3 run --chat and k3 chat: settings from the command line, and a
// conversation (OpenAI-style JSON messages) to prompt ids through src/chat.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "args.h"
#include "chat/chat_encode.h"
#include "tokenizer/tokenizer.h"

namespace k3::cli {

struct ChatSettings {
  bool thinking = false;
  std::string effort = "max";  // thinking_effort, used when thinking is on
};

// --thinking on|off and --effort LEVEL.
std::vector<Option> chat_options(const std::string& thinking_default);
ChatSettings chat_settings(const Args& args);

// messages: a JSON array of {"role", "content", ...}; ends with the assistant generation prompt.
std::vector<int32_t> encode_conversation(const Tokenizer& tok, const chat::Json& messages,
                                         const ChatSettings& s);

}  // namespace k3::cli
