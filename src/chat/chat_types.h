// Typed chat messages for C++ callers that do not hold a JSON request: build these, turn them
// into the request JSON with to_json, and pass that to build_segments / encode_chat. ToolCall
// and the parser's ParsedMessage are public (k3/chat.h); their JSON forms are here.
//
//   k3::chat::Request req{.messages = {{.role = "user", .content = "Hello"}}};
//   auto chat = k3::chat::encode_chat(tok, k3::chat::to_json(req), {.thinking = false});
#pragma once

#include <string>
#include <vector>

#include "chat/py_json.h"
#include "k3/chat.h"

namespace k3::chat {

struct Message {
  std::string role{};  // "system", "user", "assistant" or "tool"
  std::string content{};
  std::string name{};                  // optional speaker name ("name" attribute)
  std::string reasoning_content{};     // assistant only
  std::vector<ToolCall> tool_calls{};  // assistant only
  std::string tool_call_id{};          // tool only: the id of the call it answers
};

struct Request {
  std::vector<Message> messages{};
  Json tools = nullptr;            // OpenAI "tools" list, or null
  std::string tool_choice{};       // "", "auto", "required" or "none"
  Json response_format = nullptr;  // {"type": "json_object"} etc., or null
};

// OpenAI shapes: {"id", "type": "function", "function": {"name", "arguments"}}.
Json to_json(const ToolCall& call);
// Empty optional fields are left out.
Json to_json(const Message& message);
Json to_json(const Request& request);
// {"role": "assistant", "content": CONTENT or null, "reasoning_content" (when not empty),
//  "tool_calls" (when any)}, ill-formed UTF-8 replaced by U+FFFD (message_json is its text).
Json to_json(const ParsedMessage& message);

}  // namespace k3::chat
