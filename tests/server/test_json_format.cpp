// response_format json_object: the token mask on random logits always yields one JSON object
// (with thinking, after the forced close of the think channel) and then a stop id, within the
// token limit; through the server, whole and streamed answers of the tiny model are objects.
#include <limits>
#include <random>

#include "k3/sampler.h"
#include "server/json_constraint.h"
#include "server/server_fixture.h"

namespace k3::test {
namespace {

bool is_object_text(const std::string& s) { return !s.empty() && s[0] == '{' && json::accept(s); }

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

TEST(JsonConstraint, RandomLogitsGiveAnObjectThenAStop) {
  const Tokenizer& tok = tiny().tok;
  const server::JsonTokens tokens(tok, tok.n_vocab());
  const int64_t think_floor = 1 + static_cast<int64_t>(tokens.to_response.size()) + 3;
  std::mt19937 rng(21);
  for (int trial = 0; trial < 60; ++trial) {
    const bool thinking = trial % 2 == 1;
    const int64_t limit = (thinking ? think_floor : 3) + trial * 7 % 150;
    server::JsonConstraint c(tokens, thinking);
    Sampler sampler({.temperature = 1.0f, .seed = static_cast<uint64_t>(trial)});
    std::normal_distribution<float> logit(0.0f, 3.0f);
    std::vector<int32_t> out;
    std::vector<float> l(static_cast<size_t>(tok.n_vocab()));
    for (int64_t n = 0; n < limit; ++n) {
      for (float& v : l) v = logit(rng);
      ASSERT_TRUE(c.mask(l, limit - n)) << "trial " << trial << " token " << n;
      int32_t id = sampler.sample(l, out);
      if (std::isinf(l[id])) id = argmax(l);
      ASSERT_FALSE(std::isinf(l[id]));
      c.accept(id);
      out.push_back(id);
      if (contains(tokens.stop, id)) break;
    }
    ASSERT_FALSE(out.empty());
    EXPECT_TRUE(contains(tokens.stop, out.back())) << "trial " << trial << ": no stop in " << limit;
    EXPECT_TRUE(c.complete());
    size_t json_from = 0;
    if (thinking) {
      const auto close = std::find(out.begin(), out.end(), tokens.close);
      ASSERT_NE(close, out.end()) << "trial " << trial;
      for (auto it = out.begin(); it != close; ++it) EXPECT_FALSE(contains(tokens.stop, *it));
      json_from = static_cast<size_t>(close - out.begin()) + 1;
      ASSERT_LE(json_from + tokens.to_response.size(), out.size());
      EXPECT_TRUE(std::equal(tokens.to_response.begin(), tokens.to_response.end(),
                             out.begin() + static_cast<std::ptrdiff_t>(json_from)));
      json_from += tokens.to_response.size();
    }
    std::string text;
    for (size_t i = json_from; i + 1 < out.size(); ++i) {
      EXPECT_FALSE(tok.is_special(out[i])) << "trial " << trial;
      text += tok.token_to_piece(out[i]);
    }
    EXPECT_TRUE(is_object_text(text)) << "trial " << trial << ": " << text;
  }
}

TEST(JsonConstraint, TooFewTokensStillValidAsFarAsItGoes) {
  const Tokenizer& tok = tiny().tok;
  const server::JsonTokens tokens(tok, tok.n_vocab());
  server::JsonConstraint c(tokens, false);
  std::vector<float> l(static_cast<size_t>(tok.n_vocab()), 0.0f);
  ASSERT_TRUE(c.mask(l, 1));  // one token: no room to close and stop, but '{'-led ids stay
  for (size_t id = 0; id < l.size(); ++id) {
    if (std::isinf(l[id])) continue;
    server::JsonPrefix p;
    for (char ch : tok.token_to_piece(static_cast<int32_t>(id)))
      ASSERT_TRUE(p.push(static_cast<unsigned char>(ch))) << id;
  }
}

json format_body(const std::string& user, int seed, bool thinking, const char* type) {
  json b = chat_body(user, 48, 1.0);
  b["seed"] = seed;
  b["response_format"] = {{"type", type}};
  b["chat_template_kwargs"] = {{"thinking", thinking}};
  return b;
}

TEST(JsonFormat, AnswersAreObjectsWholeAndStreamed) {
  LiveServer s({.parallel = 4, .cache_bytes = 0});
  const char* const prompts[] = {"Give me a JSON object", "Name three cities"};
  for (int seed = 0; seed < 4; ++seed) {
    for (const char* prompt : prompts) {
      for (bool thinking : {false, true}) {
        const json body =
            format_body(prompt, seed, thinking, seed == 3 ? "json_schema" : "json_object");
        const Reply r = post(s, "/v1/chat/completions", body.dump());
        ASSERT_EQ(r.status, 200) << r.text;
        const json& choice = r.body["choices"][0];
        const std::string content = choice["message"]["content"].get<std::string>();
        EXPECT_TRUE(is_object_text(content)) << seed << " " << prompt << ": " << content;
        EXPECT_EQ(choice["finish_reason"], "stop") << content;
        if (thinking) {
          EXPECT_FALSE(choice["message"]["reasoning_content"].get<std::string>().empty());
        }
        // The same request streamed: the same object, delta by delta.
        json sbody = body;
        sbody["stream"] = true;
        const StreamReply sr = stream_post(s, "/v1/chat/completions", sbody.dump());
        std::string streamed;
        for (const std::string& e : sr.events) {
          const json c = json::parse(e, nullptr, false);
          if (c.is_discarded() || !c.contains("choices") || c["choices"].empty()) continue;
          const json& d = c["choices"][0]["delta"];
          if (d.contains("content") && d["content"].is_string())
            streamed += d["content"].get<std::string>();
        }
        EXPECT_EQ(streamed, content);
      }
    }
  }
}

}  // namespace
}  // namespace k3::test
