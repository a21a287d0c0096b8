// Cancelling from outside (a flag set by Ctrl-C or another thread): a long prefill stops within a
// fraction of a second, the engine refuses a sequence left half-updated until it is reset, and
// the Session afterwards generates exactly what a fresh one does.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "k3/engine.h"
#include "k3/error.h"
#include "k3/generate.h"
#include "sample/util.h"

namespace k3 {
namespace {

using test::tiny_model;
using test::tiny_tokenizer;
using Clock = std::chrono::steady_clock;

std::vector<int32_t> long_prompt(int64_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i * 37 % 6000);
  return ids;
}

GenerateParams greedy(int64_t max_tokens, int64_t chunk = 512) {
  GenerateParams p;
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  p.prefill_chunk = chunk;
  return p;
}

GenerateResult run(Session& s, const std::vector<int32_t>& prompt, const GenerateParams& p) {
  return s.generate(prompt, p, [](std::string_view) { return true; });
}

// Sets *flag after `delay` from another thread; when() is the moment it was set.
class LateSetter {
 public:
  LateSetter(std::atomic<bool>& flag, std::chrono::milliseconds delay)
      : thread_([this, &flag, delay] {
          std::this_thread::sleep_for(delay);
          set_at_ = Clock::now();
          flag.store(true);
        }) {}
  ~LateSetter() { join(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  Clock::time_point when() {
    join();
    return set_at_;
  }

 private:
  Clock::time_point set_at_;
  std::thread thread_;
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Prefill of 4000 tokens takes over a second on the tiny model with a few cores; the flag is set
// 50 ms in. One chunk of 4000 (the engine's between-layer poll) and chunks of 512 (the Session's
// poll between chunks plus the engine's).
void expect_prefill_cancel_is_quick_and_state_consistent(int64_t chunk) {
  const std::vector<int32_t> prompt = long_prompt(4000);
  Session s(tiny_model(), tiny_tokenizer());
  std::atomic<bool> flag{false};
  s.set_cancel_flag(&flag);
  bool threw = false;
  Clock::time_point set_at, returned;
  {
    LateSetter setter(flag, std::chrono::milliseconds(50));
    try {
      run(s, prompt, greedy(8, chunk));
    } catch (const Cancelled& e) {
      threw = true;
      EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
    }
    returned = Clock::now();
    set_at = setter.when();
  }
  ASSERT_TRUE(threw) << "the prefill was not cancelled";
  EXPECT_LT(seconds(returned - set_at), 1.0);
  // What the state still holds is a prefix of the prompt (whole chunks), possibly nothing.
  ASSERT_LT(s.tokens().size(), prompt.size());
  EXPECT_TRUE(std::equal(s.tokens().begin(), s.tokens().end(), prompt.begin()));

  // The same Session, flag cleared, generates what a fresh one does: from the prompt (re-using
  // whatever chunks were kept) and from a different one (a reset).
  flag.store(false);
  Session fresh(tiny_model(), tiny_tokenizer());
  const std::vector<int32_t> short_prompt = tiny_tokenizer().encode("The capital of France is");
  for (const std::vector<int32_t>* p : {&prompt, &short_prompt}) {
    const GenerateResult a = run(s, *p, greedy(8, chunk));
    fresh.reset();
    const GenerateResult b = run(fresh, *p, greedy(8, chunk));
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.text, b.text);
    EXPECT_EQ(a.stop, StopReason::max_tokens);
  }
}

TEST(Cancel, OneLongPrefillStepStopsWithinASecond) {
  expect_prefill_cancel_is_quick_and_state_consistent(4000);
}

TEST(Cancel, ChunkedPrefillStopsWithinASecond) {
  expect_prefill_cancel_is_quick_and_state_consistent(512);
}

TEST(Cancel, AFlagAlreadySetStopsBeforeAnythingRunsAndKeepsTheState) {
  Session s(tiny_model(), tiny_tokenizer());
  const std::vector<int32_t> prompt = tiny_tokenizer().encode("Once upon a time");
  run(s, prompt, greedy(2));
  const std::vector<int32_t> held = s.tokens();
  std::atomic<bool> flag{true};
  s.set_cancel_flag(&flag);
  std::vector<int32_t> longer = held;
  longer.insert(longer.end(), prompt.begin(), prompt.end());
  EXPECT_THROW(run(s, longer, greedy(2)), Cancelled);
  EXPECT_EQ(s.tokens(), held);  // nothing ran: the state is kept
}

TEST(Cancel, DuringDecodeTheAnswerSoFarIsKept) {
  Session s(tiny_model(), tiny_tokenizer());
  std::atomic<bool> flag{false};
  s.set_cancel_flag(&flag);
  int pieces = 0;
  GenerateResult r =
      s.generate(tiny_tokenizer().encode("Hello"), greedy(50), [&](std::string_view) {
        if (++pieces == 3) flag.store(true);
        return true;
      });
  EXPECT_EQ(r.stop, StopReason::cancelled);
  EXPECT_EQ(r.tokens.size(), 3u);
  // The state holds the prompt and the tokens fed back: the next turn re-uses it.
  flag.store(false);
  std::vector<int32_t> next = s.tokens();
  next.push_back(5);
  const GenerateResult again = run(s, next, greedy(4));
  EXPECT_EQ(again.n_reused, static_cast<int64_t>(next.size()) - 1);
  Session fresh(tiny_model(), tiny_tokenizer());
  EXPECT_EQ(again.tokens, run(fresh, next, greedy(4)).tokens);
}

// The engine: a step cancelled between layers leaves its sequences marked needs_reset, refused
// by step() and snapshot() until reset(); other sequences are untouched.
TEST(Cancel, EngineRefusesAHalfUpdatedSequenceUntilReset) {
  Engine engine(tiny_model(), {.state_budget_bytes = Engine::budget_for(tiny_model(), 2, 4096),
                               .max_sequences = 2});
  const SeqId a = engine.create_sequence(), other = engine.create_sequence();
  const std::vector<int64_t> few = {1, 2, 3};
  Batch b;
  b.add(other, few);
  engine.step(b);
  std::atomic<bool> flag{true};
  engine.set_cancel_flag(&flag);
  b.clear();
  b.add(a, few);
  EXPECT_THROW(engine.step(b), Cancelled);  // polled before the step: nothing changed
  EXPECT_FALSE(engine.needs_reset(a));
  EXPECT_EQ(engine.n_past(a), 0);

  flag.store(false);
  std::vector<int64_t> ids(4000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 37 % 6000);
  b.clear();
  b.add(a, ids);
  // The flag has to land between two layers of the step. On a fast, idle machine a 50 ms flag
  // can come after the step's last poll (the step then completes): shorter delays are tried on
  // a reset sequence until one lands mid-step.
  bool mid_step = false;
  for (int delay_ms : {50, 20, 8, 3, 1}) {
    engine.reset(a);
    flag.store(false);
    LateSetter setter(flag, std::chrono::milliseconds(delay_ms));
    try {
      engine.step(b);
    } catch (const Cancelled&) {
      mid_step = engine.needs_reset(a);  // false: the flag came before the step began
    }
    setter.join();
    if (mid_step) break;
  }
  ASSERT_TRUE(mid_step);
  EXPECT_TRUE(engine.needs_reset(a));
  EXPECT_FALSE(engine.needs_reset(other));
  EXPECT_EQ(engine.n_past(a), 0);
  flag.store(false);
  b.clear();
  b.add(a, few);
  EXPECT_THROW(engine.step(b), Error);
  EXPECT_THROW(engine.snapshot(a), Error);
  engine.reset(a);
  EXPECT_FALSE(engine.needs_reset(a));
  const std::vector<float> after_reset = engine.step(b);
  b.clear();
  b.add(other, few);
  engine.step(b);
  EXPECT_EQ(engine.n_past(other), 6);
  Sequence seq(tiny_model());
  std::vector<float> all = seq.prefill(few);
  const size_t V = static_cast<size_t>(tiny_model().vocab_size());
  ASSERT_EQ(after_reset.size(), V);
  EXPECT_TRUE(std::equal(after_reset.begin(), after_reset.end(), all.end() - V));
}

}  // namespace
}  // namespace k3
