// Model output back to an OpenAI message: well-formed output, every kind of damage (truncation,
// garbage, missing or stray tags), the id path, streaming, and a round trip through the encoder.
#include <gtest/gtest.h>

#include <random>

#include "chat/chat_fixture.h"
#include "chat/chat_types.h"
#include "k3/chat.h"

namespace k3::chat::test {
namespace {

const std::string kWellFormed =
    "Let me check.<|close|>think<|sep|><|open|>response<|sep|>Checking the weather."
    "<|close|>response<|sep|><|open|>tools<|sep|>"
    "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris, \"FR\"<|close|>argument<|sep|>"
    "<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>"
    "<|open|>argument key=\"opts\" type=\"object\"<|sep|>{\"z\":1,\"a\":[true,null]}"
    "<|close|>argument<|sep|>"
    "<|close|>call<|sep|>"
    "<|open|>call tool=\"say &quot;hi&quot; &amp; bye\" index=\"2\"<|sep|>"
    "<|open|>json type=\"object\"<|sep|>{broken<|close|>json<|sep|>"
    "<|close|>call<|sep|>"
    "<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";

TEST(ChatParse, ThinkingResponseAndToolCalls) {
  const ParsedMessage m = parse_output(kWellFormed);
  EXPECT_EQ(m.reasoning_content, "Let me check.");
  EXPECT_EQ(m.content, "Checking the weather.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].id, "call_0");
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  // json.dumps(args, ensure_ascii=False): default separators, the model's key order.
  EXPECT_EQ(m.tool_calls[0].arguments,
            R"({"city": "Paris, \"FR\"", "days": 3, "opts": {"z": 1, "a": [true, null]}})");
  EXPECT_EQ(m.tool_calls[1].id, "call_1");
  EXPECT_EQ(m.tool_calls[1].name, "say \"hi\" & bye");
  EXPECT_EQ(m.tool_calls[1].arguments, "{broken");  // a json block is passed through raw
  EXPECT_TRUE(m.complete);
  EXPECT_TRUE(m.problems.empty()) << m.problems[0];

  const Json j = to_json(m);
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["content"], "Checking the weather.");
  EXPECT_EQ(j["reasoning_content"], "Let me check.");
  EXPECT_EQ(j["tool_calls"][0]["type"], "function");
  EXPECT_EQ(j["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(j["tool_calls"][1]["function"]["arguments"], "{broken");
}

TEST(ChatParse, ThinkingOff) {
  const ParsedMessage m =
      parse_output("Hi there.<|close|>response<|sep|><|close|>message<|sep|>", {.thinking = false});
  EXPECT_EQ(m.reasoning_content, "");
  EXPECT_EQ(m.content, "Hi there.");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_TRUE(m.complete);  // the stop token itself is usually cut off by the server
  EXPECT_TRUE(m.problems.empty());
  const Json j = to_json(m);
  EXPECT_FALSE(j.contains("reasoning_content"));
  EXPECT_FALSE(j.contains("tool_calls"));
}

TEST(ChatParse, EmptyThinkAndNullContent) {
  const ParsedMessage m = parse_output(
      "<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>"
      "<|open|>call tool=\"f\" index=\"1\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
      "<|close|>message<|sep|>",
      {.tool_call_id_prefix = "chatcmpl-7-"});
  EXPECT_TRUE(m.problems.empty());
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].id, "chatcmpl-7-0");
  EXPECT_EQ(m.tool_calls[0].arguments, "{}");
  EXPECT_TRUE(to_json(m)["content"].is_null());
}

TEST(ChatParse, TruncatedMidTag) {
  const ParsedMessage m = parse_output(
      "R<|close|>think<|sep|><|open|>response<|sep|>C<|close|>response<|sep|><|open|>tools<|sep|>"
      "<|open|>call tool=\"get_w");
  EXPECT_EQ(m.reasoning_content, "R");
  EXPECT_EQ(m.content, "C");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_FALSE(m.complete);
  ASSERT_FALSE(m.problems.empty());
  EXPECT_NE(m.problems[0].find("output ended inside the tag header"), std::string::npos);
}

TEST(ChatParse, TruncatedInsideArgumentDropsTheCall) {
  const ParsedMessage m = parse_output(
      "<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>"
      "<|open|>call tool=\"a\" index=\"1\"<|sep|><|close|>call<|sep|>"
      "<|open|>call tool=\"b\" index=\"2\"<|sep|><|open|>argument key=\"x\" type=\"string\"<|sep|>"
      "partial val");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "a");
  EXPECT_FALSE(m.complete);
  ASSERT_EQ(m.problems.size(), 2u);
  EXPECT_EQ(m.problems[0], "output ended before the message was closed");
  EXPECT_EQ(m.problems[1], "unfinished tool call \"b\" dropped");
}

TEST(ChatParse, TruncatedInReasoning) {
  const ParsedMessage m = parse_output("I am still thinking<|clo");
  // Decoded text holds whole marker tokens, so a trailing "<|clo" is literal text.
  EXPECT_EQ(m.reasoning_content, "I am still thinking<|clo");
  EXPECT_FALSE(m.complete);
}

TEST(ChatParse, MissingCloseTags) {
  // No </think> before <response>, no </response>: the message close settles everything.
  const ParsedMessage m =
      parse_output("Reason<|open|>response<|sep|>Answer<|close|>message<|sep|><|end_of_msg|>");
  EXPECT_EQ(m.reasoning_content, "Reason");
  EXPECT_EQ(m.content, "Answer");
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.problems,
            (std::vector<std::string>{"<response> was not closed", "<think> was not closed"}));

  // <|end_of_msg|> with tags still open keeps a finished-looking call.
  const ParsedMessage e = parse_output(
      "<|close|>think<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"n\" type=\"number\"<|sep|>5<|end_of_msg|>");
  ASSERT_EQ(e.tool_calls.size(), 1u);
  EXPECT_EQ(e.tool_calls[0].arguments, R"({"n": 5})");
  EXPECT_TRUE(e.complete);
  EXPECT_EQ(e.problems.size(), 3u);  // argument, call, tools not closed
}

TEST(ChatParse, ArgumentTypes) {
  const ParsedMessage m = parse_output(
      "<|close|>think<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"b\" type=\"boolean\"<|sep|>false<|close|>argument<|sep|>"
      "<|open|>argument key=\"n\" type=\"null\"<|sep|>null<|close|>argument<|sep|>"
      "<|open|>argument key=\"a\" type=\"array\"<|sep|>[1, \"é\"]<|close|>argument<|sep|>"
      "<|open|>argument key=\"f\" type=\"number\"<|sep|>1e15<|close|>argument<|sep|>"
      "<|open|>argument key=\"s\" type=\"string\"<|sep|>42<|close|>argument<|sep|>"
      "<|open|>argument key=\"u\"<|sep|>no type<|close|>argument<|sep|>"
      "<|open|>argument key=\"bad\" type=\"number\"<|sep|>4 2<|close|>argument<|sep|>"
      "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments,
            R"({"b": false, "n": null, "a": [1, "é"], "f": 1000000000000000.0, "s": "42", )"
            R"("u": "no type", "bad": "4 2"})");
  ASSERT_EQ(m.problems.size(), 1u);
  EXPECT_EQ(m.problems[0], "argument \"bad\" of type number is not valid JSON; kept as a string");
}

TEST(ChatParse, StrayAndUnknownStructure) {
  const ParsedMessage m = parse_output(
      "a<|sep|>b<|close|>nothing<|sep|>c<|open|>aside<|sep|>d<|close|>aside<|sep|>"
      "<|close|>think<|sep|>loose text<|open|>response<|sep|>e<|close|>response<|sep|>"
      "<|open|>tools<|sep|>junk<|open|>call index=\"1\"<|sep|><|close|>call<|sep|>"
      "<|close|>tools<|sep|><|close|>message<|sep|>after<|end_of_msg|>more");
  EXPECT_EQ(m.reasoning_content, "abcd");  // an unknown tag's text stays in its channel
  EXPECT_EQ(m.content, "loose texte");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.problems, (std::vector<std::string>{
                            "stray <|sep|> ignored",
                            "close tag </nothing> without an open tag ignored",
                            "text outside the think/response channels taken as content",
                            "text directly inside <tools> ignored",
                            "tool call without a tool name dropped",
                            "text after the end of the message ignored",
                        }));
}

TEST(ChatParse, OutputStartingWithTheGenerationPrompt) {
  const ParsedMessage m = parse_output(
      "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>R<|close|>think<|sep|>"
      "<|open|>response<|sep|>C<|close|>response<|sep|><|close|>message<|sep|>");
  EXPECT_EQ(m.reasoning_content, "R");
  EXPECT_EQ(m.content, "C");
  EXPECT_TRUE(m.complete);
  EXPECT_TRUE(m.problems.empty());
  const ParsedMessage r =
      parse_output("<|open|>response<|sep|>C<|close|>response<|sep|><|close|>message<|sep|>",
                   {.thinking = false});
  EXPECT_EQ(r.content, "C");
  EXPECT_TRUE(r.problems.empty());
}

TEST(ChatParse, GarbageNeverThrows) {
  const std::vector<std::string> pieces = {"<|open|>", "<|close|>",
                                           "<|sep|>",  "<|end_of_msg|>",
                                           "<|",       "|>",
                                           "call",     " tool=\"",
                                           "\"",       "argument key=\"k\" type=\"object\"",
                                           "think",    "response",
                                           "message",  "tools",
                                           "json",     "{",
                                           "}",        "x",
                                           " ",        "\xff\xfe",
                                           "&quot;",   "é",
                                           "=",        "<|open|>call tool=\"t\"<|sep|>"};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    ParsedMessage whole;
    ASSERT_NO_THROW(whole = parse_output(text, {.thinking = trial % 2 == 0})) << text;
    ASSERT_NO_THROW(to_json(whole).dump()) << text;
    // Any chunking gives the same result and deltas that add up to it.
    StreamParser stream({.thinking = trial % 2 == 0});
    std::string reasoning, content;
    size_t calls = 0;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = 1 + rng() % 9;
      ParseDelta d = stream.push(std::string_view(text).substr(pos, len));
      reasoning += d.reasoning_content;
      content += d.content;
      calls += d.tool_calls.size();
      pos += len;
    }
    ParseDelta d = stream.finish();
    reasoning += d.reasoning_content;
    content += d.content;
    calls += d.tool_calls.size();
    const ParsedMessage& s = stream.result();
    ASSERT_EQ(s.reasoning_content, whole.reasoning_content) << text;
    ASSERT_EQ(s.content, whole.content) << text;
    ASSERT_EQ(s.tool_calls.size(), whole.tool_calls.size()) << text;
    ASSERT_EQ(s.complete, whole.complete) << text;
    ASSERT_EQ(s.problems, whole.problems) << text;
    ASSERT_EQ(reasoning, whole.reasoning_content) << text;
    ASSERT_EQ(content, whole.content) << text;
    ASSERT_EQ(calls, whole.tool_calls.size()) << text;
  }
}

TEST(ChatParse, StreamingHoldsBackPartialMarkers) {
  StreamParser p({.thinking = false});
  EXPECT_EQ(p.push("Hello <").content, "Hello ");
  EXPECT_EQ(p.push("|clo").content, "");
  EXPECT_EQ(p.push("x").content, "<|clox");  // not a marker after all
  ParseDelta d = p.push(
      " world<|close|>response<|sep|><|open|>tools<|sep|>"
      "<|open|>call tool=\"f\" index=\"1\"<|sep|><|close|>call");
  EXPECT_EQ(d.content, " world");
  EXPECT_TRUE(d.tool_calls.empty());
  d = p.push("<|sep|>");
  ASSERT_EQ(d.tool_calls.size(), 1u);  // a call is delivered once it closes
  EXPECT_EQ(d.tool_calls[0].name, "f");
  d = p.push("<|close|>tools<|sep|><|close|>message<|sep|>");
  EXPECT_TRUE(d.empty());
  EXPECT_TRUE(p.finish().empty());
  EXPECT_TRUE(p.result().complete);
  EXPECT_EQ(p.result().content, "Hello <|clox world");
}

TEST(ChatParse, IdsTellMarkersFromText) {
  const Tokenizer& tok = fixture_tokenizer();
  // The model writes the characters "<|close|>response<|sep|>" as ordinary tokens, then the
  // real markers.
  std::vector<int32_t> ids = tok.encode("I type <|close|>response<|sep|> literally", false);
  for (const char* marker :
       {"<|close|>", "response", "<|sep|>", "<|close|>", "message", "<|sep|>", "<|end_of_msg|>"}) {
    std::vector<int32_t> part = tok.encode(marker, true);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  const ParsedMessage by_ids = parse_output_ids(tok, ids, {.thinking = false});
  EXPECT_EQ(by_ids.content, "I type <|close|>response<|sep|> literally");
  EXPECT_TRUE(by_ids.complete);
  EXPECT_TRUE(by_ids.problems.empty());
  // As text the literal characters are read as markers.
  const ParsedMessage by_text = parse_output(tok.decode(ids), {.thinking = false});
  EXPECT_EQ(by_text.content, "I type  literally");
  EXPECT_FALSE(by_text.problems.empty());
  // [EOS] ends the message too; ids out of range are skipped, never thrown on.
  const ParsedMessage eos =
      parse_output_ids(tok,
                       std::vector<int32_t>{tok.encode("ok", false)[0],
                                            tok.special_ids().config_eos, -5, tok.n_vocab() + 3},
                       {.thinking = false});
  EXPECT_TRUE(eos.complete);
  EXPECT_EQ(eos.content, tok.decode(tok.encode("ok", false)).substr(0, eos.content.size()));
}

TEST(ChatParse, RoundTripThroughTheEncoder) {
  // Render an assistant turn as history, cut the part the generation prompt would have
  // written, and parse the rest back.
  const Json req = Json::parse(R"({"messages": [{"role": "assistant",
      "reasoning_content": "Need data.", "content": "On it.", "tool_calls": [
      {"id": "x", "type": "function", "function": {"name": "search",
       "arguments": "{\"q\": \"k3 <b>\", \"n\": 2, \"f\": {\"b\": [1.5, false]}}"}},
      {"id": "y", "type": "function", "function": {"name": "raw", "arguments": "{oops"}}]}]})");
  const EncodedChat chat = encode_chat(fixture_tokenizer(), req,
                                       {.thinking_effort = "", .add_generation_prompt = false});
  const std::string prefix = "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>";
  const std::string text = segments_text(chat.segments);
  ASSERT_TRUE(text.starts_with(prefix));
  const std::vector<int32_t> prefix_ids = fixture_tokenizer().encode(prefix, true);
  const std::vector<int32_t> generated(chat.ids.begin() + prefix_ids.size(), chat.ids.end());
  for (const ParsedMessage& m : {parse_output(text.substr(prefix.size())),
                                 parse_output_ids(fixture_tokenizer(), generated)}) {
    EXPECT_EQ(m.reasoning_content, "Need data.");
    EXPECT_EQ(m.content, "On it.");
    ASSERT_EQ(m.tool_calls.size(), 2u);
    EXPECT_EQ(m.tool_calls[0].name, "search");
    EXPECT_EQ(m.tool_calls[0].arguments, R"({"q": "k3 <b>", "n": 2, "f": {"b": [1.5, false]}})");
    EXPECT_EQ(m.tool_calls[1].arguments, "{oops");
    EXPECT_TRUE(m.complete);
    EXPECT_TRUE(m.problems.empty());
  }
}

}  // namespace
}  // namespace k3::chat::test
