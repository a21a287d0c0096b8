// Internal to src/chat: rendering of single messages and system blocks into segments, and the
// request-field helpers they share. Error messages name the field: "messages[2].content".
#pragma once

#include <string>
#include <string_view>

#include "chat/py_json.h"
#include "chat/xtml.h"

namespace k3::chat::detail {

// Python's str() of a JSON scalar (strings as they are, numbers as JSON, true -> "True");
// objects, arrays and null are an error naming `where`.
std::string py_str(const Json& value, const std::string& where);

// Python's `not text.strip()`: empty or only str.isspace() characters.
bool is_blank(std::string_view text);

struct RenderState {
  bool thinking = true;
  Json last_tool_calls;   // of the latest assistant message (null when none)
  size_t tool_index = 0;  // tool messages since that assistant message
};

void render_message(SegmentWriter& w, const Json& message, const std::string& where,
                    RenderState& state);

// A system message type="tool-declare" with the static ("# Tools") or the dynamic
// ("## New Tools Available") body; `tools` is written as given (sort it first).
void render_tool_declare(SegmentWriter& w, const Json& tools, bool dynamic);

// <message role="system" type="TYPE"> body </message> <|end_of_msg|>
void render_internal_system(SegmentWriter& w, std::string_view type, std::string_view body);

}  // namespace k3::chat::detail
