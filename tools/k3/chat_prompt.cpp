#include "chat_prompt.h"

#include "k3/error.h"

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

std::vector<int32_t> encode_conversation(const Tokenizer& tok, const Json& messages,
                                         const ChatSettings& s, bool generation_prompt) {
  const Json request = {{"messages", messages}};
  // Messages hold checked UTF-8 (check_utf8, the parser, message_json), so "replace" never acts.
  const std::string text = request.dump(-1, ' ', false, Json::error_handler_t::replace);
  return chat::encode_chat_json(tok, text,
                                {.thinking = s.thinking,
                                 .thinking_effort = s.effort,
                                 .add_generation_prompt = generation_prompt});
}

}  // namespace k3::cli
