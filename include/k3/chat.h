// The K3 chat format (XTML, spec §10.5) both ways: an OpenAI-style chat request to prompt ids,
// matching Moonshot's encoding_k3.py (build_chat_segments), and the model's output back to an
// OpenAI assistant message. JSON crosses this header as text; no JSON library types here.
//
//   const k3::chat::Options opt{.thinking = false};
//   std::vector<int32_t> prompt = k3::chat::encode_chat_json(
//       tok, R"({"messages": [{"role": "user", "content": "Hello"}]})", opt);
//   // ... generate `output` ids from `prompt` (k3::Session, k3/generate.h) ...
//   k3::chat::ParsedMessage m = k3::chat::parse_output_ids(tok, output, {.thinking = false});
//   std::string reply = k3::chat::message_json(m);  // {"role":"assistant","content":...}
//
// Requests. {"messages": [...], "tools": [...], "tool_choice": ..., "response_format": ...}
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
// A malformed request (not JSON, a message that is not an object, an unknown role, a tool call
// without a name, arguments that are JSON but not an object, ...) throws k3::Error naming the
// field. The keys of tool-call arguments given as an object are written in the request's order.
//
// Output. After the generation prompt the model writes (thinking on)
//   REASONING <|close|>think<|sep|> <|open|>response<|sep|> CONTENT <|close|>response<|sep|>
//   [<|open|>tools<|sep|> <|open|>call tool="NAME" index="1"<|sep|>
//      <|open|>argument key="K" type="string"<|sep|>RAW<|close|>argument<|sep|> ...
//    <|close|>call<|sep|> ... <|close|>tools<|sep|>]
//   <|close|>message<|sep|><|end_of_msg|>
// or, thinking off, the same from CONTENT on. A call holds argument elements (type="string":
// the raw text; any other type: JSON, kept as a string when it does not parse) or one
// `json type="object"` element whose raw text becomes the arguments string as it is.
//
// Parsing never throws: malformed or truncated output gives what could be recovered, with
// `complete` false when the message was never closed and a note per defect in `problems`.
// Rules: text goes to the innermost channel on the tag stack (think -> reasoning, response ->
// content, argument/json -> the current call); a close tag closes the nearest open tag of that
// name and everything opened inside it (noted); a close tag with no open match is ignored;
// non-blank text directly inside the message (outside any channel) is taken as content; a call
// without a tool name is dropped; a call still open when the output ends is dropped (its
// arguments may be cut), but one still open at <|end_of_msg|> is kept; everything after the
// message's close tag or <|end_of_msg|> is ignored. If the output starts with the generation
// prompt itself (<|open|>message ...<|sep|><|open|>think<|sep|>), those tags are taken in stride.
//
// Text input sees markers as text, so a model writing the characters "<|close|>" as ordinary
// tokens is misread; parse_output_ids tells marker tokens from ordinary ones and has no such
// ambiguity. Tool call ids are ParseOptions::tool_call_id_prefix + the call's 0-based position.
// `arguments` is JSON text as Python's json.dumps(args, ensure_ascii=False) writes it (keys in
// the model's order), like vLLM's K3 tool parser.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "k3/tokenizer.h"

namespace k3::chat {

// ---- requests to prompt ids --------------------------------------------------------------------

struct Options {
  bool thinking = true;  // think channel in history and in the generation prompt
  // "low", "high" or "max" (HF's default): adds the thinking-effort message when thinking is
  // on. "" leaves the message out (a k3 extension); any other value is an error.
  std::string thinking_effort = "max";
  bool add_generation_prompt = true;
};

// The prompt ids of a chat request given as JSON text (see "Requests" above).
std::vector<int32_t> encode_chat_json(const Tokenizer& tok, std::string_view request_json,
                                      const Options& options = {});

// ---- model output to an assistant message ------------------------------------------------------

struct ToolCall {
  std::string id{};
  std::string name{};
  std::string arguments{};  // JSON text of an object (OpenAI's function.arguments)
};

struct ParseOptions {
  bool thinking = true;  // the prompt ended with an open think tag (false: open response tag)
  std::string tool_call_id_prefix = "call_";
};

struct ParsedMessage {
  std::string reasoning_content{};
  std::string content{};
  std::vector<ToolCall> tool_calls{};
  bool complete = false;                // the model closed its message (or sent <|end_of_msg|>)
  std::vector<std::string> problems{};  // malformed structure, in order; empty when well formed
};

// The message as OpenAI JSON text: {"role": "assistant", "content": CONTENT or null,
// "reasoning_content" (when not empty), "tool_calls" (when any)}. ParsedMessage keeps the bytes
// it was given; here ill-formed UTF-8 (possible only in text passed to parse_output, never in
// decoded ids) becomes U+FFFD, so the result is always valid JSON.
std::string message_json(const ParsedMessage& message);

ParsedMessage parse_output(std::string_view text, const ParseOptions& options = {});

// Marker tokens are recognised by id (looked up by name); the tokenizer's stop ids count as
// <|end_of_msg|>; runs of other ids are decoded as text.
ParsedMessage parse_output_ids(const Tokenizer& tok, std::span<const int32_t> ids,
                               const ParseOptions& options = {});

// What one push added.
struct ParseDelta {
  std::string reasoning_content{};
  std::string content{};
  std::vector<ToolCall> tool_calls{};  // calls completed by this push
  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
};

// Incremental parse_output for streaming: feed text as it is decoded (e.g. from
// k3::StreamDecoder, which spells marker tokens out), get the new reasoning and content at once.
// Text that may be the start of a marker is held back until it is known. The concatenated deltas
// and result() equal parse_output(all text).
class StreamParser {
 public:
  explicit StreamParser(const ParseOptions& options = {});
  ~StreamParser();
  StreamParser(StreamParser&&) noexcept;
  StreamParser& operator=(StreamParser&&) noexcept;

  ParseDelta push(std::string_view text);
  ParseDelta finish();  // end of output: flushes held-back text, settles `complete`
  const ParsedMessage& result() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace k3::chat
