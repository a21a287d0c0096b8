#include "chat_prompt.h"

#include "core/error.h"

namespace k3::cli {

std::vector<Option> chat_options(const std::string& thinking_default) {
  return {{"thinking", "", "on|off", "let the model think before it answers", thinking_default},
          {"effort", "", "LEVEL", "thinking effort when thinking: low, high or max", "max"}};
}

ChatSettings chat_settings(const Args& args) {
  const std::string t = args.str("thinking");
  check(t == "on" || t == "off", "--thinking must be 'on' or 'off', found '", t, "'");
  const std::string e = args.str("effort");
  check(e == "low" || e == "high" || e == "max", "--effort must be low, high or max, found '", e,
        "'");
  return {.thinking = t == "on", .effort = e};
}

std::vector<int32_t> encode_conversation(const Tokenizer& tok, const chat::Json& messages,
                                         const ChatSettings& s) {
  chat::Json request = {{"messages", messages}};
  return chat::encode_chat(tok, request, {.thinking = s.thinking, .thinking_effort = s.effort}).ids;
}

}  // namespace k3::cli
