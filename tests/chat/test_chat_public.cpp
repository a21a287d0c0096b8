// The JSON-text layer of the public chat API (k3/chat.h) against the JSON-typed layer under it:
// encode_chat_json gives encode_chat's ids, message_json is to_json's text, bad input throws.
#include <gtest/gtest.h>

#include "chat/chat_fixture.h"
#include "chat/chat_types.h"
#include "k3/chat.h"
#include "k3/error.h"
#include "k3/tokenizer.h"

namespace k3::chat::test {
namespace {

const char* kRequest = R"({"messages": [
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Weather in Paris?"},
  {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function",
    "function": {"name": "get_weather", "arguments": {"z": 1, "city": "Paris"}}}]},
  {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}],
  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]})";

TEST(ChatPublic, EncodeChatJsonMatchesTheTypedLayer) {
  const Tokenizer& tok = fixture_tokenizer();
  for (bool thinking : {false, true}) {
    const Options o{.thinking = thinking, .thinking_effort = "high"};
    EXPECT_EQ(encode_chat_json(tok, kRequest, o), encode_chat(tok, Json::parse(kRequest), o).ids);
  }
  // Key order of object arguments survives the text round trip ("z" before "city").
  const std::string text = segments_text(build_segments(Json::parse(kRequest)));
  EXPECT_LT(text.find("\"z\""), text.find("\"city\""));
}

TEST(ChatPublic, EncodeChatJsonRejectsBadInput) {
  const Tokenizer& tok = fixture_tokenizer();
  EXPECT_THROW(encode_chat_json(tok, "{\"messages\": [", {}), Error);
  EXPECT_THROW(
      encode_chat_json(tok, "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}"),
      Error);
  try {
    encode_chat_json(tok, R"({"messages": [{"role": "wizard", "content": "x"}]})");
    FAIL() << "an unknown role must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wizard"), std::string::npos) << e.what();
  }
}

TEST(ChatPublic, MessageJsonIsToJsonAsText) {
  const ParsedMessage m = parse_output(
      "Hmm.<|close|>think<|sep|><|open|>response<|sep|>Sunny \xff.<|close|>response<|sep|>"
      "<|close|>message<|sep|>");
  const std::string text = message_json(m);
  const Json j = Json::parse(text);  // valid JSON although the content held a bad byte
  EXPECT_EQ(j, to_json(m));
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["reasoning_content"], "Hmm.");
  EXPECT_EQ(j["content"], "Sunny \xEF\xBF\xBD.");
  EXPECT_EQ(message_json(parse_output("")), R"({"role":"assistant","content":null})");
}

TEST(ChatPublic, FindInvalidUtf8) {
  EXPECT_EQ(find_invalid_utf8("plain \xC3\xA9 text"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xC0\xAF"), 2u);   // overlong
  EXPECT_EQ(find_invalid_utf8("abc\xE2\x82"), 3u);  // cut short
}

}  // namespace
}  // namespace k3::chat::test
