// Scheduler events to OpenAI chat deltas: reasoning, content and tool calls split at any byte,
// the streamed deltas add up to the whole message, completed tool calls come as one delta
// each with their index, id, name and arguments.
#include <random>

#include "server/openai.h"
#include "server/server_fixture.h"

namespace k3::test {
namespace {

const std::string kToolOutput =
    "Let me look.<|close|>think<|sep|><|open|>response<|sep|>Checking."
    "<|close|>response<|sep|><|open|>tools<|sep|>"
    "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>"
    "<|close|>call<|sep|>"
    "<|open|>call tool=\"get_time\" index=\"2\"<|sep|>"
    "<|open|>argument key=\"tz\" type=\"string\"<|sep|>CET<|close|>argument<|sep|>"
    "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>";

TEST(ChatAnswer, StreamedDeltasAddUpToTheMessage) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    server::ChatAnswer answer(tiny().tok, /*thinking=*/true, /*logprobs=*/false);
    std::string reasoning, content;
    json calls = json::array();
    auto take = [&](const json& d) {
      if (d.is_null()) return;
      if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("content")) content += d["content"].get<std::string>();
      if (d.contains("tool_calls"))
        for (const json& c : d["tool_calls"]) calls.push_back(c);
    };
    for (size_t at = 0; at < kToolOutput.size();) {
      const size_t n = std::min<size_t>(1 + rng() % 9, kToolOutput.size() - at);
      server::TokenEvent e;
      e.text = kToolOutput.substr(at, n);
      at += n;
      json lp = json::array();
      take(answer.push({e}, lp));
      EXPECT_TRUE(lp.empty());
    }
    take(answer.finish_delta());
    EXPECT_EQ(reasoning, "Let me look.");
    EXPECT_EQ(content, "Checking.");
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0]["index"], 0);
    EXPECT_EQ(calls[1]["index"], 1);
    EXPECT_EQ(calls[0]["type"], "function");
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(calls[0]["function"]["arguments"], R"({"city": "Paris"})");
    EXPECT_EQ(calls[1]["function"]["name"], "get_time");
    EXPECT_TRUE(answer.has_tool_calls());
    const json m = answer.message();
    EXPECT_EQ(m["content"], "Checking.");
    EXPECT_EQ(m["reasoning_content"], "Let me look.");
    ASSERT_EQ(m["tool_calls"].size(), 2u);
    EXPECT_EQ(m["tool_calls"][0]["id"], calls[0]["id"]);
    EXPECT_EQ(m["tool_calls"][1]["function"]["arguments"], calls[1]["function"]["arguments"]);
  }
  EXPECT_EQ(server::finish_reason({.reason = "stop"}, true), "tool_calls");
  EXPECT_EQ(server::finish_reason({.reason = "length"}, true), "length");
}

TEST(ChatAnswer, ThinkingOffAndLogprobEntries) {
  server::ChatAnswer answer(tiny().tok, /*thinking=*/false, /*logprobs=*/true);
  server::TokenEvent e;
  e.id = tiny().tok.encode("Hello")[0];
  e.text = std::string(tiny().tok.token_to_piece(e.id));
  e.chosen = {e.id, -0.5f};
  e.top = {{e.id, -0.5f}, {1, -2.0f}};
  json lp = json::array();
  const json d = answer.push({e}, lp);
  EXPECT_EQ(d["content"], e.text);
  ASSERT_EQ(lp.size(), 1u);
  EXPECT_EQ(lp[0]["token"], e.text);
  EXPECT_FLOAT_EQ(lp[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(lp[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(lp[0]["bytes"].size(), e.text.size());
}

}  // namespace
}  // namespace k3::test
