// The generation loop on a tiny random model: greedy equals a hand-written prefill/decode loop,
// seeds, stops (ids, strings, max tokens, context), state re-use, cancellation, bad input.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "k3/generate.h"
#include "sample/util.h"

namespace k3 {
namespace {

using test::tiny_model;
using test::tiny_tokenizer;

std::vector<int32_t> prompt_ids() { return tiny_tokenizer().encode("The capital of France is"); }

GenerateResult generate(Session& s, const std::vector<int32_t>& prompt, GenerateParams p,
                        std::vector<std::string>* pieces = nullptr) {
  return s.generate(prompt, p, [pieces](std::string_view piece) {
    if (pieces) pieces->emplace_back(piece);
    return true;
  });
}

TEST(Generate, GreedyEqualsAHandWrittenLoop) {
  const std::vector<int32_t> prompt = prompt_ids();
  Sequence seq(tiny_model());
  std::vector<float> logits = seq.prefill({prompt.begin(), prompt.end()});
  const int64_t V = tiny_model().vocab_size();
  std::vector<float> last(logits.end() - V, logits.end());
  std::vector<int32_t> expected;
  for (int i = 0; i < 12; ++i) {
    const int32_t id =
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    expected.push_back(id);
    last = seq.decode(id);
  }
  Session s(tiny_model(), tiny_tokenizer());
  std::vector<std::string> pieces;
  GenerateResult r =
      generate(s, prompt, {.sampling = {.temperature = 0}, .max_tokens = 12}, &pieces);
  EXPECT_EQ(r.tokens, expected);
  EXPECT_EQ(r.stop, StopReason::max_tokens);
  EXPECT_EQ(r.text, tiny_tokenizer().decode(expected));
  std::string joined;
  for (const std::string& p : pieces) joined += p;
  EXPECT_EQ(joined, r.text);
  EXPECT_EQ(r.n_prompt, static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(r.n_prefill, r.n_prompt);
  EXPECT_EQ(r.n_decode, 11);  // the last token is never run
  EXPECT_EQ(s.tokens().size(), prompt.size() + 11);
  EXPECT_GT(r.prefill_tps(), 0);
  EXPECT_GT(r.decode_tps(), 0);
}

TEST(Generate, SameSeedSameTextOtherSeedOtherText) {
  auto run = [](uint64_t seed) {
    Session s(tiny_model(), tiny_tokenizer());
    return generate(s, prompt_ids(),
                    {.sampling = {.temperature = 1.2f, .seed = seed}, .max_tokens = 16})
        .tokens;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

TEST(Generate, StopIdEndsWithoutText) {
  Session s(tiny_model(), tiny_tokenizer());
  const GenerateParams greedy{.sampling = {.temperature = 0}, .max_tokens = 4};
  const int32_t first = generate(s, prompt_ids(), greedy).tokens[0];
  GenerateParams p = greedy;
  p.stop_ids = {first};
  GenerateResult r = generate(s, prompt_ids(), p);
  EXPECT_EQ(r.stop, StopReason::eos);
  EXPECT_EQ(r.tokens, std::vector<int32_t>{first});
  EXPECT_EQ(r.text, "");
  // A bias that makes <|end_of_msg|> certain.
  const int32_t eos = tiny_tokenizer().special_ids().eos;
  p = {.sampling = {.temperature = 1.0f},
       .stop_ids = tiny_tokenizer().stop_ids(),
       .logit_bias = {{eos, 1000.0f}}};
  r = generate(s, prompt_ids(), p);
  EXPECT_EQ(r.stop, StopReason::eos);
  EXPECT_EQ(r.tokens, std::vector<int32_t>{eos});
}

TEST(Generate, StopStringAcrossTokensIsCutAndNotEmitted) {
  Session s(tiny_model(), tiny_tokenizer());
  const GenerateParams greedy{.sampling = {.temperature = 0}, .max_tokens = 40};
  GenerateResult full = generate(s, prompt_ids(), greedy);
  // A two-byte stop string around a token boundary with ASCII on both sides.
  StreamDecoder dec(tiny_tokenizer());
  std::string text, stop;
  for (int32_t id : full.tokens) {
    const std::string piece = dec.push(id);
    if (stop.empty() && !text.empty() && !piece.empty() &&
        static_cast<unsigned char>(text.back()) < 0x80 &&
        static_cast<unsigned char>(piece[0]) < 0x80) {
      stop = text.substr(text.size() - 1) + piece.substr(0, 1);
    }
    text += piece;
  }
  ASSERT_FALSE(stop.empty()) << "no ASCII token boundary in: " << text;
  GenerateParams p = greedy;
  p.stop_strings = {stop};
  std::vector<std::string> pieces;
  GenerateResult r = generate(s, prompt_ids(), p, &pieces);
  EXPECT_EQ(r.stop, StopReason::stop_string);
  EXPECT_EQ(r.text, full.text.substr(0, full.text.find(stop)));
  std::string joined;
  for (const std::string& piece : pieces) joined += piece;
  EXPECT_EQ(joined, r.text);
}

TEST(Generate, ContextLimitStopsAndLongPromptsAreRejected) {
  Session s(tiny_model(), tiny_tokenizer());
  const std::vector<int32_t> prompt = prompt_ids();
  const int64_t n = static_cast<int64_t>(prompt.size());
  GenerateResult r = generate(s, prompt, {.sampling = {.temperature = 0}, .n_ctx = n + 3});
  EXPECT_EQ(r.stop, StopReason::context_full);
  EXPECT_EQ(r.tokens.size(), 3u);
  r = generate(s, prompt, {.n_ctx = n});
  EXPECT_EQ(r.stop, StopReason::context_full);
  EXPECT_TRUE(r.tokens.empty());
  try {
    generate(s, prompt, {.n_ctx = n - 1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the prompt has " + std::to_string(n) +
                                         " tokens, more than the context limit of " +
                                         std::to_string(n - 1)),
              std::string::npos)
        << e.what();
  }
}

TEST(Generate, BadIdsAndEmptyPromptsAreErrors) {
  Session s(tiny_model(), tiny_tokenizer());
  EXPECT_THROW(generate(s, {}, {}), Error);
  try {
    generate(s, {1, 6516}, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt token id 6516 (position 1) is outside the "
                                         "vocabulary [0, 6516)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(generate(s, {1, -3}, {}), Error);
  EXPECT_THROW(generate(s, {1}, {.sampling = {.top_p = 0}}), Error);
}

TEST(Generate, TokenizerLargerThanTheModelIsAnError) {
  auto small = Model::load(K3_SOURCE_DIR "/tests/data/models/c1_tiny");  // vocab 256
  try {
    Session s(*small, tiny_tokenizer());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer has 6516 token ids but the model's vocabulary"),
              std::string::npos)
        << e.what();
  }
}

TEST(Generate, ExtendingThePromptReusesTheStateAndMatchesAFreshRun) {
  const GenerateParams greedy{.sampling = {.temperature = 0}, .max_tokens = 6, .prefill_chunk = 5};
  Session s(tiny_model(), tiny_tokenizer());
  GenerateResult first = generate(s, prompt_ids(), greedy);
  std::vector<int32_t> next = s.tokens();  // prompt + the tokens run
  ASSERT_EQ(next.size(), prompt_ids().size() + 5);
  for (int32_t id : tiny_tokenizer().encode(" and then")) next.push_back(id);
  GenerateResult reused = generate(s, next, greedy);
  EXPECT_EQ(reused.n_reused, static_cast<int64_t>(prompt_ids().size() + 5));
  EXPECT_EQ(reused.n_prefill, reused.n_prompt - reused.n_reused);
  Session fresh(tiny_model(), tiny_tokenizer());
  GenerateResult cold = generate(fresh, next, greedy);
  EXPECT_EQ(cold.n_reused, 0);
  EXPECT_EQ(reused.tokens, cold.tokens);
  // The same prompt again re-uses everything it can: here, all but nothing to prefill.
  GenerateResult again = generate(s, s.tokens(), greedy);
  EXPECT_EQ(again.n_prefill, 0);
  // A prompt that differs inside the held ids starts over.
  std::vector<int32_t> other = next;
  other[1] = other[1] == 5 ? 6 : 5;
  EXPECT_EQ(generate(s, other, greedy).n_reused, 0);
}

TEST(Generate, CallbackCancels) {
  Session s(tiny_model(), tiny_tokenizer());
  int calls = 0;
  GenerateResult r = s.generate(prompt_ids(), {.sampling = {.temperature = 0}, .max_tokens = 50},
                                [&calls](std::string_view) { return ++calls < 3; });
  EXPECT_EQ(r.stop, StopReason::cancelled);
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(s.tokens().size(), prompt_ids().size() + 2);  // the cancelled token is not run
}

}  // namespace
}  // namespace k3
