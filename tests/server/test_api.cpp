// The HTTP API over real loopback sockets: every endpoint, the OpenAI response and chunk
// shapes, usage, logprobs, errors and authentication.
#include <cmath>

#include "server/server_fixture.h"

namespace k3::test {
namespace {

TEST(ServerApi, HealthModelsAndMetrics) {
  LiveServer s;
  Reply h = get(s, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body["status"], "ok");
  Reply m = get(s, "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.body["object"], "list");
  EXPECT_EQ(m.body["data"][0]["id"], "k3");
  Reply metrics = get(s, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(metric(metrics.text, "k3_running_sequences"), 0);
  EXPECT_NE(metrics.text.find("k3_time_to_first_token_seconds_bucket"), std::string::npos);
  EXPECT_NE(metrics.text.find("k3_inter_token_latency_seconds_count"), std::string::npos);
  Reply page = get(s, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.text.find("<html"), std::string::npos);
}

TEST(ServerApi, ChatCompletionWhole) {
  LiveServer s;
  Reply r = post(s, "/v1/chat/completions", chat_body("Hello", 6).dump());
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["object"], "chat.completion");
  EXPECT_EQ(r.body["choices"][0]["message"]["role"], "assistant");
  const std::string reason = r.body["choices"][0]["finish_reason"];
  EXPECT_TRUE(reason == "length" || reason == "stop") << reason;
  const json& u = r.body["usage"];
  EXPECT_GT(u["prompt_tokens"].get<int>(), 0);
  EXPECT_LE(u["completion_tokens"].get<int>(), 6);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
}

TEST(ServerApi, ChatStreamMatchesWholeAnswer) {
  LiveServer s;
  json body = chat_body("Tell me a story", 12);
  body["chat_template_kwargs"] = {{"thinking", false}};
  Reply whole = post(s, "/v1/chat/completions", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.text;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  Reply r = post(s, "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.text;
  const std::vector<std::string> events = sse_data(r.text);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json first = json::parse(events.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  std::string finish;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json c = json::parse(events[i]);
    EXPECT_TRUE(c["usage"].is_null());
    const json& ch = c["choices"][0];
    if (ch["delta"].contains("content")) content += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], whole.body["usage"]["completion_tokens"]);
  EXPECT_EQ(finish, whole.body["choices"][0]["finish_reason"]);
  const json& msg = whole.body["choices"][0]["message"];
  EXPECT_EQ(content, msg["content"].is_null() ? "" : msg["content"].get<std::string>());
}

TEST(ServerApi, CompletionsAndLegacyLogprobs) {
  LiveServer s;
  Reply r = post(
      s, "/v1/completions",
      json{{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 3}}
          .dump());
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["object"], "text_completion");
  const json& lp = r.body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), r.body["usage"]["completion_tokens"].get<size_t>());
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_EQ(lp["top_logprobs"][i].size(), 3u);
  }
  // Token ids as the prompt, streamed.
  Reply st = post(s, "/v1/completions",
                  json{{"prompt", {1, 2, 3}}, {"max_tokens", 3}, {"stream", true}}.dump());
  ASSERT_EQ(st.status, 200);
  EXPECT_EQ(sse_data(st.text).back(), "[DONE]");
}

TEST(ServerApi, ChatLogprobsAreTheModelsDistribution) {
  LiveServer s;
  json body = chat_body("Hi", 4);
  body["logprobs"] = true;
  body["top_logprobs"] = 5;
  Reply r = post(s, "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.text;
  const json& content = r.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), r.body["usage"]["completion_tokens"].get<size_t>());
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), 5u);
    // Greedy: the sampled token is the most likely one; the list is sorted and is a
    // distribution's top (probabilities sum to at most 1).
    EXPECT_EQ(e["token"], e["top_logprobs"][0]["token"]);
    double mass = 0, prev = 0;
    for (size_t i = 0; i < 5; ++i) {
      const double lp = e["top_logprobs"][i]["logprob"];
      if (i > 0) {
        EXPECT_LE(lp, prev);
      }
      prev = lp;
      mass += std::exp(lp);
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
  }
}

TEST(ServerApi, SeededSamplingRepeats) {
  LiveServer s;
  json body = chat_body("Hi", 8, 0.9);
  body["seed"] = 1234;
  body["top_p"] = 0.9;
  body["top_k"] = 50;
  body["min_p"] = 0.01;
  Reply a = post(s, "/v1/chat/completions", body.dump());
  Reply b = post(s, "/v1/chat/completions", body.dump());
  ASSERT_EQ(a.status, 200) << a.text;
  EXPECT_EQ(a.body["choices"][0]["message"], b.body["choices"][0]["message"]);
}

// Every bad request gets a 4xx with an OpenAI error body naming the problem, and the server
// keeps answering.
TEST(ServerApi, BadRequestsGet4xxAndTheServerKeepsServing) {
  LiveServer s({.n_ctx = 512});
  struct Case {
    std::string body;
    std::string needle;  // in the message
  };
  const std::string big(6000, 'x');
  const std::vector<Case> cases = {
      {"{bad json", "not valid JSON"},
      {"[1, 2]", "JSON object"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "wizard"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": 7})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0})", "top_p"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 3})", "'n'"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})", "stop"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"abc": 1}})",
       "logit_bias"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream_options": {}})",
       "stream_options"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}})",
       "response_format"},
      {json{{"messages", {{{"role", "user"}, {"content", big}}}}}.dump(), "context"},
  };
  for (const Case& c : cases) {
    Reply r = post(s, "/v1/chat/completions", c.body);
    EXPECT_EQ(r.status, 400) << c.body.substr(0, 80) << " -> " << r.text;
    ASSERT_TRUE(r.body.contains("error")) << r.text;
    EXPECT_EQ(r.body["error"]["type"], "invalid_request_error");
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(c.needle), std::string::npos)
        << c.needle << " not in " << r.text;
  }
  EXPECT_EQ(post(s, "/v1/completions", R"({"prompt": {"a": 1}})").status, 400);
  EXPECT_EQ(post(s, "/v1/completions", R"({"prompt": [1, 99999999]})").status, 400);
  EXPECT_EQ(post(s, "/v1/nothing", "{}").status, 404);
  Reply huge = post(s, "/v1/chat/completions", std::string(9 << 20, 'a'));  // above 8 MiB
  EXPECT_EQ(huge.status, 413);
  EXPECT_EQ(huge.body["error"]["type"], "invalid_request_error");
  Reply ok = post(s, "/v1/chat/completions", chat_body("still there?", 2).dump());
  EXPECT_EQ(ok.status, 200) << ok.text;
  EXPECT_EQ(metric(get(s, "/metrics").text, "k3_http_responses_total{code=\"400\"}"),
            cases.size() + 2);
}

TEST(ServerApi, ApiKey) {
  LiveServer s({.api_key = "sekrit"});
  const std::string body = chat_body("Hi", 2).dump();
  Reply none = post(s, "/v1/chat/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.body["error"]["code"], "invalid_api_key");
  EXPECT_EQ(post(s, "/v1/chat/completions", body, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(post(s, "/v1/chat/completions", body, {{"Authorization", "Bearer sekrit"}}).status,
            200);
  EXPECT_EQ(get(s, "/health").status, 200);  // health stays open for load balancers
}

}  // namespace
}  // namespace k3::test
