// Issue 9, bug 5: deeply nested JSON in a tool call (the model's output, or a request) used to
// overflow the stack in the Python-style dump. Now nesting is limited where JSON is read and the
// dump itself is depth-bounded.
#include <gtest/gtest.h>

#include "chat/chat_fixture.h"
#include "chat/chat_types.h"
#include "chat/py_json.h"
#include "k3/chat.h"
#include "k3/error.h"
#include "k3/json_depth.h"

namespace k3::chat::test {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string call_with_object_argument(const std::string& value) {
  return "<|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>"
         "<|open|>argument key=\"a\" type=\"object\"<|sep|>" +
         value +
         "<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
         "<|close|>message<|sep|><|end_of_msg|>";
}

TEST(DeepJson, ToolCallArgumentTooDeepIsKeptAsAString) {
  const std::string deep = nested(100000);
  const ParsedMessage m = parse_output(call_with_object_argument(deep));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"a\": \"" + deep + "\"}");
  ASSERT_FALSE(m.problems.empty());
  EXPECT_NE(m.problems[0].find("not valid JSON"), std::string::npos) << m.problems[0];
}

TEST(DeepJson, ToolCallArgumentAtTheLimitIsParsed) {
  // As deep as the limit allows, with a number at the bottom.
  const std::string ok = std::string(kMaxJsonDepth, '[') + "1" + std::string(kMaxJsonDepth, ']');
  const ParsedMessage m = parse_output(call_with_object_argument(ok));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments.substr(0, 7), "{\"a\": [");
  for (const std::string& p : m.problems) EXPECT_EQ(p.find("JSON"), std::string::npos) << p;
}

TEST(DeepJson, PyDumpsRefusesValuesDeeperThanTheLimit) {
  Json v = Json::array();
  for (int i = 0; i < kMaxJsonDepth + 5; ++i) v = Json::array({std::move(v)});
  EXPECT_THROW(py_dumps(v, JsonSeparators::python), Error);
  EXPECT_THROW(deep_sorted(v), Error);
  // Containers 0..kMaxJsonDepth deep, a number below the deepest one.
  const std::string text =
      std::string(kMaxJsonDepth + 1, '[') + "1" + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_EQ(py_dumps(Json::parse(text), JsonSeparators::compact), text);
}

TEST(DeepJson, RequestNestedTooDeepIsAnError) {
  const std::string request =
      R"({"messages": [{"role": "user", "content": "hi", "x": )" + nested(100000) + "}]}";
  try {
    encode_chat_json(fixture_tokenizer(), request, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128"), std::string::npos) << e.what();
  }
}

TEST(DeepJson, ToolCallArgumentsStringNestedTooDeepIsAnError) {
  Json request = Json::parse(R"({"messages": [{"role": "assistant", "content": "",
    "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": ""}}]}]})");
  request["messages"][0]["tool_calls"][0]["function"]["arguments"] =
      "{\"a\": " + nested(100000) + "}";
  EXPECT_THROW(encode_chat_json(fixture_tokenizer(), request.dump(), {}), Error);
}

TEST(JsonDepth, CountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(json_too_deep_at(nested(3), 3), std::string_view::npos);
  EXPECT_EQ(json_too_deep_at(nested(4), 3), 3u);
  EXPECT_EQ(json_too_deep_at(R"(["[[[[", "\"[[[["])", 1), std::string_view::npos);
  EXPECT_EQ(json_too_deep_at(R"({"a": {"b": [1]}})", 3), std::string_view::npos);
  EXPECT_EQ(json_too_deep_at(R"({"a": {"b": [[1]]}})", 3), 13u);
  EXPECT_EQ(json_too_deep_at("", 0), std::string_view::npos);
  EXPECT_THROW(check_json_depth(nested(200), "x.json"), Error);
}

int g_evaluated = 0;
std::string counted() {
  ++g_evaluated;
  return "message";
}

TEST(JsonDepth, K3CheckEvaluatesTheMessageOnlyOnFailure) {
  g_evaluated = 0;
  K3_CHECK(true, "never built: ", counted());
  EXPECT_EQ(g_evaluated, 0);
  EXPECT_THROW(K3_CHECK(false, "built: ", counted()), Error);
  EXPECT_EQ(g_evaluated, 1);
}

}  // namespace
}  // namespace k3::chat::test
