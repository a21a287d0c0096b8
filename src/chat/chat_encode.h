// K3 chat prompts: an OpenAI-style chat request rendered in the XTML format (spec §10.5) as
// segments and token ids, matching Moonshot's encoding_k3.py (build_chat_segments).
//
//   k3::chat::Json request = k3::chat::Json::parse(body);   // ordered_json: keeps key order
//   k3::chat::EncodedChat chat = k3::chat::encode_chat(tok, request, {.thinking = false});
//   // chat.ids: the prompt; chat.segments: what it is made of (segments_debug() prints them)
//
// The request format is documented in k3/chat.h ("Requests"), which also holds Options and the
// JSON-text entry point encode_chat_json; this header is the JSON-typed layer under it. Key order
// matters in one place: the keys of tool-call arguments given as an object are written in the
// request's order, so parse requests into ordered_json (Json) to keep it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/py_json.h"
#include "chat/xtml.h"
#include "k3/chat.h"
#include "k3/tokenizer.h"

namespace k3::chat {

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
