#include "chat/chat_types.h"

namespace k3::chat {

Json to_json(const ToolCall& call) {
  Json fn = {{"name", call.name}, {"arguments", call.arguments}};
  return Json{{"id", call.id}, {"type", "function"}, {"function", std::move(fn)}};
}

Json to_json(const Message& m) {
  Json out = {{"role", m.role}, {"content", m.content}};
  if (!m.name.empty()) out["name"] = m.name;
  if (!m.reasoning_content.empty()) out["reasoning_content"] = m.reasoning_content;
  if (!m.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ToolCall& c : m.tool_calls) calls.push_back(to_json(c));
    out["tool_calls"] = std::move(calls);
  }
  if (!m.tool_call_id.empty()) out["tool_call_id"] = m.tool_call_id;
  return out;
}

Json to_json(const Request& r) {
  Json messages = Json::array();
  for (const Message& m : r.messages) messages.push_back(to_json(m));
  Json out = {{"messages", std::move(messages)}};
  if (!r.tools.is_null()) out["tools"] = r.tools;
  if (!r.tool_choice.empty()) out["tool_choice"] = r.tool_choice;
  if (!r.response_format.is_null()) out["response_format"] = r.response_format;
  return out;
}

}  // namespace k3::chat
