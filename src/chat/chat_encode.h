// K3 chat prompts: an OpenAI-style chat request rendered in the XTML format (spec §10.5) as
// segments and token ids, matching Moonshot's encoding_k3.py (build_chat_segments).
//
//   k3::chat::Json request = k3::chat::Json::parse(body);   // ordered_json: keeps key order
//   k3::chat::EncodedChat chat = k3::chat::encode_chat(tok, request, {.thinking = false});
//   // chat.ids: the prompt; chat.segments: what it is made of (segments_debug() prints them)
//
// The request is {"messages": [...], "tools": [...], "tool_choice": ..., "response_format": ...}
// (other fields are ignored). Prompt order: tool declaration, thinking-effort message, the
// conversation, tool-choice message, response-format message, generation prompt. Messages:
//   * system / user: content is a string, null, or a list of parts ({"type": "text", "text"} or
//     an image part, which becomes the <|kimi_image_placeholder|> segment); optional "name".
//   * system with a non-empty "tools" list: a dynamic tool declaration (its content is unused).
//   * assistant: "reasoning_content" (or "reasoning"), "content", "tool_calls" (OpenAI shape,
//     or flat {"name", "arguments"}); arguments a JSON object or a JSON string holding one; an
//     unparseable string is kept raw in a json block.
//   * tool: "content", "tool_call_id"; its tool name comes from the matching assistant call,
//     else "tool"/"name", else the call at the same position.
// A malformed request (a message that is not an object, an unknown role, a tool call without a
// name, arguments that are JSON but not an object, ...) throws k3::Error naming the field.
// Key order matters in one place: the keys of tool-call arguments given as an object are
// written in the request's order, so parse requests into ordered_json (Json) to keep it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/py_json.h"
#include "chat/xtml.h"
#include "tokenizer/tokenizer.h"

namespace k3::chat {

struct Options {
  bool thinking = true;  // think channel in history and in the generation prompt
  // "low", "high" or "max" (HF's default): adds the thinking-effort message when thinking is
  // on. "" leaves the message out (a k3 extension); any other value is an error.
  std::string thinking_effort = "max";
  bool add_generation_prompt = true;
};

std::vector<Segment> build_segments(const Json& request, const Options& options = {});

struct EncodedChat {
  std::vector<Segment> segments;
  std::vector<int32_t> ids;
};

EncodedChat encode_chat(const Tokenizer& tok, const Json& request, const Options& options = {});

// encoding_k3's tool-result ordering: each run of consecutive tool messages is stably sorted by
// the position of its tool_call_id in the latest assistant message's tool_calls, and each
// matched message's "tool" (and "name", if present) is set to the matched call's function name.
// A run with any message that does not match is left as it is. Exposed for tests.
Json reorder_tool_results(const Json& messages);

}  // namespace k3::chat
