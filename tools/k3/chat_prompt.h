// The chat format for k3 run --chat and k3 chat: settings from the command line, and a
// conversation (OpenAI-style JSON messages) to prompt ids through k3/chat.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "args.h"
#include "k3/chat.h"
#include "k3/tokenizer.h"

namespace k3::cli {

// OpenAI-style messages; ordered_json keeps each object's keys in the order they were written,
// which the chat format preserves for tool-call arguments.
using Json = nlohmann::ordered_json;

struct ChatSettings {
  bool thinking = false;
  std::string effort = "max";  // thinking_effort, used when thinking is on
};

// --thinking on|off and --effort LEVEL.
std::vector<Option> chat_options(const std::string& thinking_default);
ChatSettings chat_settings(const Args& args);

// messages: a JSON array of {"role", "content", ...}; ends with the assistant generation prompt
// unless generation_prompt is false. Throws k3::Error on a malformed message.
std::vector<int32_t> encode_conversation(const Tokenizer& tok, const Json& messages,
                                         const ChatSettings& s, bool generation_prompt = true);

}  // namespace k3::cli
