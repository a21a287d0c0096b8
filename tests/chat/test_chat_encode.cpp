// XTML prompt rendering (spec §10.5): segment structure, ids, and each message kind. Expected
// segment lists are written out by hand in the spec's notation (segments_debug); the fixture
// ids of the spec example were checked against tiktoken on the same fixture.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "chat/chat_fixture.h"
#include "chat/chat_types.h"
#include "core/error.h"

namespace k3::chat::test {
namespace {

// Hand-written expectations in segments_debug notation.
std::string o(const std::string& tag, const std::vector<Attr>& attrs = {}) {
  std::string s = "«<|open|>» \"" + tag + "\"";
  for (const auto& [k, v] : attrs) s += " \" " + k + "\" \"=\\\"\" \"" + v + "\" \"\\\"\"";
  return s + " «<|sep|>»";
}
std::string c(const std::string& tag) { return "«<|close|>» \"" + tag + "\" «<|sep|>»"; }
const std::string kEnd = "«<|end_of_msg|>»";
std::string t(const std::string& text) { return "\"" + text + "\""; }
std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : " ") + p;
  return s;
}

const Options kNoThinking{.thinking = false};

TEST(ChatEncode, SpecExampleThinkingOff) {
  const Json req = Json::parse(R"({"messages": [{"role": "user", "content": "Hello"}]})");
  const EncodedChat chat = encode_chat(fixture_tokenizer(), req, kNoThinking);
  EXPECT_EQ(segments_debug(chat.segments),
            "«<|open|>» \"message\" \" role\" \"=\\\"\" \"user\" \"\\\"\" «<|sep|>» \"Hello\" "
            "«<|close|>» \"message\" «<|sep|>» «<|end_of_msg|>» "
            "«<|open|>» \"message\" \" role\" \"=\\\"\" \"assistant\" \"\\\"\" «<|sep|>» "
            "«<|open|>» \"response\" «<|sep|>»");
  EXPECT_EQ(segments_text(chat.segments),
            "<|open|>message role=\"user\"<|sep|>Hello<|close|>message<|sep|><|end_of_msg|>"
            "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>");
  // 22 segments: 22 ids with the real tokenizer, where each plain segment is one token.
  EXPECT_EQ(chat.segments.size(), 22u);
  // The fixture's small vocabulary splits the plain segments; ids checked with tiktoken.
  const int32_t open = 6263, close = 6264, sep = 6265, eom = 6262;
  const std::vector<int32_t> expected = {open,  2370, 82,   82,  1593, 68,  220, 81,   78,
                                         460,   28,   1,    84,  354,  81,  1,   sep,  // user open
                                         39,    1938, 78,                              // Hello
                                         close, 2370, 82,   82,  1593, 68,  sep, eom,  // close, end
                                         open,  2370, 82,   82,  1593, 68,  220, 81,   78,
                                         460,   28,   1,    331, 82,   72,  340, 1460, 83,
                                         1,     sep,  open, 310, 5088, 639, 354, sep};
  EXPECT_EQ(chat.ids, expected);
  EXPECT_EQ(chat.ids, encode_each(fixture_tokenizer(), chat.segments));
  const Tokenizer& tok = fixture_tokenizer();
  EXPECT_EQ(tok.special_id("<|open|>"), open);
  EXPECT_EQ(tok.special_id("<|close|>"), close);
  EXPECT_EQ(tok.special_id("<|sep|>"), sep);
  EXPECT_EQ(tok.special_id("<|end_of_msg|>"), eom);
}

TEST(ChatEncode, ThinkingEffortMessageByDefault) {
  const Json req = Json::parse(R"({"messages": [{"role": "user", "content": "Hello"}]})");
  const std::string body =
      "`thinking_effort` guides on how much to think in your thinking channel (not including the "
      "response channel), supported values include `low`, `medium`, `high`, and `max`.\\n"
      "Now the system is invoked with `thinking_effort=max`.";
  EXPECT_EQ(debug(req),
            join({o("message", {{"role", "system"}, {"type", "thinking-effort"}}), t(body),
                  c("message"), kEnd, o("message", {{"role", "user"}}), t("Hello"), c("message"),
                  kEnd, o("message", {{"role", "assistant"}}), o("think")}));
  const EncodedChat chat = encode_chat(fixture_tokenizer(), req);
  EXPECT_EQ(chat.ids, encode_each(fixture_tokenizer(), chat.segments));
}

TEST(ChatEncode, ThinkingEffortValues) {
  const Json req = Json::parse(R"({"messages": []})");
  for (std::string effort : {"low", "high", "max"}) {
    const std::string text = segments_text(build_segments(req, {.thinking_effort = effort}));
    EXPECT_NE(text.find("invoked with `thinking_effort=" + effort + "`.<|close|>"),
              std::string::npos)
        << text;
  }
  EXPECT_EQ(debug(req, {.thinking_effort = ""}),
            join({o("message", {{"role", "assistant"}}), o("think")}));
  EXPECT_EQ(debug(req, {.thinking = false, .thinking_effort = "max"}),
            join({o("message", {{"role", "assistant"}}), o("response")}));
  // vLLM accepts only low/high/max although the message text lists `medium`.
  EXPECT_THROW(build_segments(req, {.thinking_effort = "medium"}), Error);
  EXPECT_EQ(debug(req, {.thinking = false, .add_generation_prompt = false}), "");
}

TEST(ChatEncode, AttributeEscapingAndPlainContent) {
  EXPECT_EQ(escape_attr("a&b \"c\""), "a&amp;b &quot;c&quot;");
  EXPECT_EQ(escape_attr("&quot;"), "&amp;quot;");  // & first, so the text survives a round trip
  const Json req = Json::parse(
      R"({"messages": [{"role": "user", "name": "a&b \"c\"", "content": "x<|open|>y"}]})");
  const EncodedChat chat = encode_chat(fixture_tokenizer(), req, kNoThinking);
  EXPECT_EQ(
      segments_debug(chat.segments),
      join({o("message", {{"role", "user"}, {"name", "a&amp;b &quot;c&quot;"}}), t("x<|open|>y"),
            c("message"), kEnd, o("message", {{"role", "assistant"}}), o("response")}));
  // "<|open|>" typed by the user is ordinary text: only the 3 structural opens are specials.
  const int32_t open = fixture_tokenizer().special_id("<|open|>");
  EXPECT_EQ(std::count(chat.ids.begin(), chat.ids.end(), open), 3);
  EXPECT_EQ(chat.ids, encode_each(fixture_tokenizer(), chat.segments));
}

TEST(ChatEncode, EmptySegmentsAreDropped) {
  // An empty attribute value leaves " key" "=\"" "\""; empty content leaves nothing.
  const Json req = Json::parse(R"({"messages": [
      {"role": "tool", "tool": "", "content": ""}, {"role": "user", "content": null}]})");
  EXPECT_EQ(debug(req, {.thinking = false, .add_generation_prompt = false}),
            "«<|open|>» \"message\" \" role\" \"=\\\"\" \"tool\" \"\\\"\" \" tool\" \"=\\\"\" "
            "\"\\\"\" \" index\" \"=\\\"\" \"1\" \"\\\"\" «<|sep|>» " +
                join({c("message"), kEnd, o("message", {{"role", "user"}}), c("message"), kEnd}));
}

TEST(ChatEncode, ToolDeclarationSortedCompactUnicode) {
  const Json req = Json::parse(R"({
    "messages": [{"role": "user", "content": "Hi"}],
    "tools": [{"type": "function", "function": {"name": "météo", "parameters": {
      "type": "object", "required": ["z", "a"],
      "properties": {"z": {"type": "number", "minimum": 1e15}, "a": {"type": "string"}}},
      "description": "Wetter \"heute\""}}]})");
  const std::string json =
      "{\\\"function\\\":{\\\"description\\\":\\\"Wetter \\\\\\\"heute\\\\\\\"\\\","
      "\\\"name\\\":\\\"météo\\\",\\\"parameters\\\":{\\\"properties\\\":{\\\"a\\\":{\\\"type\\\":"
      "\\\"string\\\"},\\\"z\\\":{\\\"minimum\\\":1000000000000000.0,\\\"type\\\":\\\"number\\\"}},"
      "\\\"required\\\":[\\\"z\\\",\\\"a\\\"],\\\"type\\\":\\\"object\\\"}},\\\"type\\\":"
      "\\\"function\\\"}";
  EXPECT_EQ(debug(req, kNoThinking),
            join({o("message", {{"role", "system"}, {"type", "tool-declare"}}),
                  t("# Tools\\nHere are the available tools, described in JSONSchema.\\n\\n"
                    "```json\\n[" +
                    json + "]\\n```"),
                  c("message"), kEnd, o("message", {{"role", "user"}}), t("Hi"), c("message"), kEnd,
                  o("message", {{"role", "assistant"}}), o("response")}));
  // The same text, unescaped, in the prompt.
  const std::string text = segments_text(build_segments(req, kNoThinking));
  EXPECT_NE(text.find("```json\n[{\"function\":{\"description\":\"Wetter \\\"heute\\\"\","
                      "\"name\":\"météo\",\"parameters\":{\"properties\":{\"a\""),
            std::string::npos)
      << text;
  // An empty tools list declares nothing.
  EXPECT_EQ(debug(Json::parse(R"({"messages": [], "tools": []})"), kNoThinking),
            join({o("message", {{"role", "assistant"}}), o("response")}));
}

TEST(ChatEncode, DynamicToolDeclaration) {
  const Json req = Json::parse(R"({"messages": [{"role": "system", "content": "unused",
      "tools": [{"name": "b", "a": 1}]}]})");
  EXPECT_EQ(debug(req, {.thinking = false, .add_generation_prompt = false}),
            join({o("message", {{"role", "system"}, {"type", "tool-declare"}}),
                  t("## New Tools Available\\nThe system dynamically extends the toolset via "
                    "lazy-loading.\\nYou have access to all existing and extended tools.\\n"
                    "Here are the specs for the extended tools.\\n\\n```json\\n"
                    "[{\\\"a\\\":1,\\\"name\\\":\\\"b\\\"}]\\n```"),
                  c("message"), kEnd}));
}

TEST(ChatEncode, AssistantHistoryWithToolCalls) {
  const Json req = Json::parse(R"({"messages": [{"role": "assistant", "name": "k3",
      "reasoning_content": "Think.", "content": "Calling.", "tool_calls": [
      {"id": "a", "type": "function", "function": {"name": "weather",
       "arguments": "{\"city\": \"Paris\", \"days\": 3, \"opts\": {\"z\": [1, 2.5], \"a\": null}, \"ok\": true, \"empty\": \"\"}"}},
      {"id": "b", "type": "function", "function": {"name": "raw", "arguments": "not json {"}},
      {"id": "c", "name": "flat", "arguments": {"q": "x"}},
      {"id": "d", "type": "function", "function": {"name": "none", "arguments": "  "}}]}]})");
  const std::string expected = join(
      {o("message", {{"role", "assistant"}, {"name", "k3"}}), o("think"), t("Think."), c("think"),
       o("response"), t("Calling."), c("response"), o("tools"),
       o("call", {{"tool", "weather"}, {"index", "1"}}),
       o("argument", {{"key", "city"}, {"type", "string"}}), t("Paris"), c("argument"),
       o("argument", {{"key", "days"}, {"type", "number"}}), t("3"), c("argument"),
       // Non-string values: json.dumps with default separators, the request's key order.
       o("argument", {{"key", "opts"}, {"type", "object"}}),
       t("{\\\"z\\\": [1, 2.5], \\\"a\\\": null}"), c("argument"),
       o("argument", {{"key", "ok"}, {"type", "boolean"}}), t("true"), c("argument"),
       o("argument", {{"key", "empty"}, {"type", "string"}}), c("argument"), c("call"),
       o("call", {{"tool", "raw"}, {"index", "2"}}), o("json", {{"type", "object"}}),
       t("not json {"), c("json"), c("call"), o("call", {{"tool", "flat"}, {"index", "3"}}),
       o("argument", {{"key", "q"}, {"type", "string"}}), t("x"), c("argument"), c("call"),
       o("call", {{"tool", "none"}, {"index", "4"}}), c("call"), c("tools"), c("message"), kEnd});
  EXPECT_EQ(debug(req, {.thinking_effort = "", .add_generation_prompt = false}), expected);
}

TEST(ChatEncode, ThinkChannelInHistory) {
  const Json req = Json::parse(R"({"messages": [
      {"role": "assistant", "content": "A", "reasoning_content": "  "},
      {"role": "assistant", "content": "B", "reasoning_content": "", "reasoning": "R"}]})");
  const Options opts{.thinking_effort = "", .add_generation_prompt = false};
  // Tags always present when thinking is on; blank reasoning leaves them empty; "reasoning"
  // stands in for an empty "reasoning_content".
  EXPECT_EQ(
      debug(req, opts),
      join({o("message", {{"role", "assistant"}}), o("think"), c("think"), o("response"), t("A"),
            c("response"), c("message"), kEnd, o("message", {{"role", "assistant"}}), o("think"),
            t("R"), c("think"), o("response"), t("B"), c("response"), c("message"), kEnd}));
  EXPECT_EQ(debug(req, {.thinking = false, .add_generation_prompt = false}),
            join({o("message", {{"role", "assistant"}}), o("response"), t("A"), c("response"),
                  c("message"), kEnd, o("message", {{"role", "assistant"}}), o("response"), t("B"),
                  c("response"), c("message"), kEnd}));
}

Json two_call_conversation(const char* first_id, const char* second_id) {
  Json req = Json::parse(R"({"messages": [
      {"role": "user", "content": "Q"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "id-w", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
        {"id": "id-t", "type": "function", "function": {"name": "time", "arguments": "{}"}}]},
      {"role": "tool", "content": "first"},
      {"role": "tool", "content": "second"}]})");
  req["messages"][2]["tool_call_id"] = first_id;
  req["messages"][3]["tool_call_id"] = second_id;
  return req;
}

std::string tool_results_tail(const std::string& first, const std::string& second,
                              const std::string& first_name, const std::string& second_name) {
  return join({o("message", {{"role", "tool"}, {"tool", first_name}, {"index", "1"}}), t(first),
               c("message"), kEnd,
               o("message", {{"role", "tool"}, {"tool", second_name}, {"index", "2"}}), t(second),
               c("message"), kEnd});
}

TEST(ChatEncode, ToolResultsReorderedByCallId) {
  const Options opts{.thinking = false, .add_generation_prompt = false};
  const std::string in_order = debug(two_call_conversation("id-w", "id-t"), opts);
  EXPECT_TRUE(in_order.ends_with(tool_results_tail("first", "second", "weather", "time")));
  // Results given in the other order are sorted back to the calls' order.
  const std::string swapped = debug(two_call_conversation("id-t", "id-w"), opts);
  EXPECT_TRUE(swapped.ends_with(tool_results_tail("second", "first", "weather", "time")))
      << swapped;
  // A run with an unknown id is left as it is; names then come from the calls by position.
  const std::string unknown = debug(two_call_conversation("id-t", "nope"), opts);
  EXPECT_TRUE(unknown.ends_with(tool_results_tail("first", "second", "weather", "time")))
      << unknown;
}

TEST(ChatEncode, ReorderSetsToolNameFromTheCall) {
  const Json messages = Json::parse(R"([
      {"role": "assistant", "tool_calls": [{"id": 7, "function": {"name": "f"}},
                                           {"id": "x", "function": {"name": "g"}}]},
      {"role": "tool", "tool_call_id": "x", "name": "stale", "content": "2"},
      {"role": "tool", "tool_call_id": 7, "content": "1"},
      {"role": "user", "content": "u"}])");
  const Json out = reorder_tool_results(messages);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1]["content"], "1");
  EXPECT_EQ(out[1]["tool"], "f");
  EXPECT_FALSE(out[1].contains("name"));
  EXPECT_EQ(out[2]["content"], "2");
  EXPECT_EQ(out[2]["tool"], "g");
  EXPECT_EQ(out[2]["name"], "g");
  EXPECT_EQ(out[3], messages[3]);
}

TEST(ChatEncode, ToolChoiceAndResponseFormat) {
  const Options opts{.thinking = false, .add_generation_prompt = false};
  Json req = Json::parse(R"({"messages": [], "tool_choice": "required"})");
  EXPECT_EQ(debug(req, opts), join({o("message", {{"role", "system"}, {"type", "tool-choice"}}),
                                    t("The system is invoked with `tool_choice=required`.\\n"
                                      "You MUST call tools in the next message."),
                                    c("message"), kEnd}));
  req["tool_choice"] = "none";
  EXPECT_NE(debug(req, opts).find("You MUST NOT call any tools in the next message."),
            std::string::npos);
  req["tool_choice"] = "auto";
  EXPECT_EQ(debug(req, opts), "");

  const std::string no_md =
      "Your response must be raw JSON data without markdown code blocks (```json) or any "
      "additional formatting.";
  req = Json::parse(R"({"messages": [], "response_format": {"type": "json_object"}})");
  EXPECT_EQ(debug(req, opts),
            join({o("message", {{"role", "system"}, {"type", "response-format"}}),
                  t("The system is invoked with `response_format=json_object`.\\n" + no_md),
                  c("message"), kEnd}));
  req = Json::parse(R"({"messages": [], "tool_choice": "none", "response_format":
      {"type": "json_schema", "json_schema": {"name": "n", "schema": {"z": 1, "a": {"y": 2, "b": 3}}}}})");
  const std::string text = segments_text(build_segments(req, opts));
  EXPECT_NE(text.find("tool_choice=none"), std::string::npos);
  EXPECT_LT(text.find("tool_choice=none"), text.find("response_format=json_schema"));
  EXPECT_NE(text.find("The system is invoked with `response_format=json_schema`.\n" + no_md +
                      "\nThe JSON data must match the following schema:\n```json\n"
                      "{\"a\":{\"b\":3,\"y\":2},\"z\":1}\n```<|close|>"),
            std::string::npos)
      << text;
}

TEST(ChatEncode, ImagePartsAndTextParts) {
  const Json req = Json::parse(R"({"messages": [{"role": "user", "content": [
      {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]}]})");
  const EncodedChat chat = encode_chat(fixture_tokenizer(), req, kNoThinking);
  EXPECT_EQ(segments_debug(chat.segments),
            join({o("message", {{"role", "user"}}), t("look"), "«<|kimi_image_placeholder|>»",
                  c("message"), kEnd, o("message", {{"role", "assistant"}}), o("response")}));
  EXPECT_EQ(chat.ids, encode_each(fixture_tokenizer(), chat.segments));
}

TEST(ChatEncode, TypedRequestMatchesJson) {
  Request typed;
  typed.messages = {
      {.role = "system", .content = "Be brief."},
      {.role = "user", .content = "Weather?", .name = "ann"},
      {.role = "assistant",
       .content = "",
       .reasoning_content = "Use the tool.",
       .tool_calls = {{.id = "c1", .name = "weather", .arguments = R"({"city":"Oslo"})"}}},
      {.role = "tool", .content = "Rain", .tool_call_id = "c1"}};
  typed.tool_choice = "required";
  const Json req = Json::parse(R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather?", "name": "ann"},
      {"role": "assistant", "content": "", "reasoning_content": "Use the tool.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
      {"role": "tool", "content": "Rain", "tool_call_id": "c1"}], "tool_choice": "required"})");
  EXPECT_EQ(to_json(typed), req);
  EXPECT_EQ(build_segments(to_json(typed)), build_segments(req));
  EXPECT_NE(
      debug(req).find(
          join({o("message", {{"role", "tool"}, {"tool", "weather"}, {"index", "1"}}), t("Rain")})),
      std::string::npos);
}

void expect_error(const std::string& request, const std::string& fragment) {
  try {
    build_segments(Json::parse(request));
    ADD_FAILURE() << "no error for " << request;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ChatEncode, BadRequestsNameTheField) {
  expect_error(R"([])", "expected a JSON object");
  expect_error(R"({})", "\"messages\" must be a list");
  expect_error(R"({"messages": [], "tools": {}})", "\"tools\" must be a list");
  expect_error(R"({"messages": [{"role": "developer", "content": "x"}]})",
               "messages[0].role: unsupported role \"developer\"");
  expect_error(R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content");
  expect_error(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
               "messages[0].content[0]");
  expect_error(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]})",
               "messages[0].tool_calls[0].function: the tool call has no \"name\"");
  expect_error(R"({"messages": [{"role": "assistant", "tool_calls": [
                   {"function": {"name": "f", "arguments": "[1]"}}]}]})",
               "messages[0].tool_calls[0].function.arguments: the arguments are JSON but not");
  expect_error(R"({"messages": [{"role": "tool", "content": "x"}]})",
               "messages[0]: the tool message needs a resolvable tool name");
}

TEST(ChatEncode, TokenizerWithoutMarkersIsAnError) {
  const std::vector<Segment> segs = {{"<|open|>", true}, {"x", false}};
  EXPECT_EQ(encode_segments(fixture_tokenizer(), segs).size(),
            1 + fixture_tokenizer().encode("x", false).size());
  // The same vocabulary with no named specials: every special is <|reserved_token_N|>.
  const std::string config =
      ::testing::TempDir() + "k3_chat_no_markers_" + std::to_string(::getpid()) + ".json";
  std::ofstream(config) << R"({"added_tokens_decoder": {}})";
  const Tokenizer bare = Tokenizer::load_files(
      std::string(K3_SOURCE_DIR) + "/tests/data/tokenizer/tiktoken.model", config);
  std::remove(config.c_str());
  try {
    encode_segments(bare, segs);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no special token <|open|>"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace k3::chat::test
