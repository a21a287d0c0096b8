// Continuous batching in the scheduler: batched greedy answers equal one-at-a-time answers,
// long prompts are prefilled in chunks between other requests' decodes, cancelled requests
// give back their sequence and blocks, a full queue refuses, stop strings and limits end
// generation where they should.
#include <random>
#include <thread>

#include "server/scheduler_util.h"

namespace k3::test {
namespace {

using server::Admit;
using server::Metrics;
using server::Scheduler;
using server::SchedulerOptions;

std::vector<int32_t> prompt_of(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(rng() % 6000u);
  return v;
}

void expect_pool_back_to_full(const Metrics& m) {
  EXPECT_EQ(m.gauges.running, 0);
  EXPECT_EQ(m.gauges.queue_depth, 0);
  EXPECT_EQ(m.gauges.free_entries + m.gauges.cache_entries, m.gauges.max_entries);
  if (m.gauges.cache_entries == 0) {
    EXPECT_EQ(m.gauges.free_blocks, m.gauges.total_blocks);
  }
}

TEST(Batching, GreedyBatchedEqualsOneAtATime) {
  const std::vector<size_t> lengths = {5, 17, 40, 64, 90, 130, 200, 3, 33, 150};
  Metrics batched_m, single_m;
  std::vector<Outcome> batched, single;
  {
    Scheduler s(*tiny().model, tiny().tok, {.parallel = 6, .step_tokens = 48}, batched_m);
    std::vector<std::shared_ptr<server::RequestChannel>> chs;
    for (size_t i = 0; i < lengths.size(); ++i) {
      chs.push_back(greedy(prompt_of(lengths[i], static_cast<uint32_t>(i)), 10));
      ASSERT_EQ(s.submit(chs.back()), Admit::ok);
    }
    for (auto& c : chs) batched.push_back(wait_for(*c));
    ASSERT_TRUE(settle(s));
    expect_pool_back_to_full(batched_m);
  }
  {
    Scheduler s(*tiny().model, tiny().tok, {.parallel = 1, .cache_bytes = 0}, single_m);
    for (size_t i = 0; i < lengths.size(); ++i) {
      auto c = greedy(prompt_of(lengths[i], static_cast<uint32_t>(i)), 10);
      ASSERT_EQ(s.submit(c), Admit::ok);
      single.push_back(wait_for(*c));
    }
  }
  int64_t tokens = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_EQ(batched[i].finish.reason, single[i].finish.reason) << "request " << i;
    EXPECT_EQ(batched[i].ids, single[i].ids) << "request " << i;
    EXPECT_EQ(batched[i].text, single[i].text) << "request " << i;
    tokens += static_cast<int64_t>(lengths[i] + batched[i].ids.size());
  }
  // Batching shares steps: far fewer steps than one request at a time needs (one per decode
  // token plus one per 48-token prompt chunk, summed over the requests).
  EXPECT_LT(batched_m.steps, single_m.steps / 2) << batched_m.steps << " vs " << single_m.steps;
  EXPECT_EQ(batched_m.completion_tokens, single_m.completion_tokens);
}

// /metrics must count a request as running as soon as it streams: the gauges were published
// only after each step (and its test delay), so a reader that saw the first tokens could still
// read 0 running (the chat page's stop test did, once).
TEST(Batching, RunningGaugeCountsARequestBeforeItsFirstStepEnds) {
  Metrics m;
  Scheduler s(*tiny().model, tiny().tok, {.parallel = 2, .cache_bytes = 0, .step_delay_ms = 1000},
              m);
  auto a = greedy(prompt_of(10, 3), 100000);
  ASSERT_EQ(s.submit(a), Admit::ok);
  std::vector<server::TokenEvent> events;
  for (int i = 0; i < 200 && events.empty(); ++i) a->wait(events, std::chrono::milliseconds(20));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(m.gauges.running, 1);  // within the step's 1 s delay
  a->cancel();
  ASSERT_TRUE(settle(s));
  expect_pool_back_to_full(m);
}

TEST(Batching, CancelFreesTheSequenceAndBlocks) {
  Metrics m;
  Scheduler s(*tiny().model, tiny().tok, {.parallel = 2, .cache_bytes = 0}, m);
  auto a = greedy(prompt_of(50, 1), 100000);
  auto b = greedy(prompt_of(20, 2), 5);
  ASSERT_EQ(s.submit(a), Admit::ok);
  ASSERT_EQ(s.submit(b), Admit::ok);
  std::vector<server::TokenEvent> events;
  for (int i = 0; i < 2000 && events.size() < 3; ++i)
    a->wait(events, std::chrono::milliseconds(50));
  ASSERT_GE(events.size(), 3u);
  a->cancel();
  const Outcome oa = wait_for(*a), ob = wait_for(*b);
  EXPECT_EQ(oa.finish.reason, "cancelled");
  EXPECT_EQ(ob.finish.reason, "length");
  EXPECT_EQ(ob.ids.size(), 5u);
  ASSERT_TRUE(settle(s));
  EXPECT_EQ(m.requests_cancelled, 1);
  expect_pool_back_to_full(m);
}

TEST(Batching, FullQueueRefuses) {
  Metrics m;
  Scheduler s(*tiny().model, tiny().tok, {.parallel = 1, .max_queue = 1}, m);
  auto a = greedy(prompt_of(10, 1), 100000), b = greedy(prompt_of(10, 2), 100000),
       c = greedy(prompt_of(10, 3), 3);
  EXPECT_EQ(s.submit(a), Admit::ok);
  EXPECT_EQ(s.submit(b), Admit::ok);
  EXPECT_EQ(s.submit(c), Admit::full);
  s.drain();
  EXPECT_EQ(s.submit(c), Admit::draining);
  s.cancel_all();
  EXPECT_EQ(wait_for(*a).finish.reason, "cancelled");
  EXPECT_EQ(wait_for(*b).finish.reason, "cancelled");
  ASSERT_TRUE(settle(s));
  expect_pool_back_to_full(m);
}

TEST(Batching, StopStringsAndLimits) {
  Metrics m;
  Scheduler s(*tiny().model, tiny().tok, {.parallel = 2, .n_ctx = 64}, m);
  const std::vector<int32_t> p = prompt_of(12, 9);
  auto free_run = greedy(p, 30);
  ASSERT_EQ(s.submit(free_run), Admit::ok);
  const Outcome full = wait_for(*free_run);
  ASSERT_EQ(full.finish.reason, "length");
  ASSERT_EQ(full.ids.size(), 30u);
  ASSERT_GE(full.text.size(), 12u);
  // A stop string taken from the middle of the greedy text: the answer ends just before it.
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  server::GenRequest r = free_run->request;
  r.stop = {stop};
  auto stopped = std::make_shared<server::RequestChannel>(r);
  ASSERT_EQ(s.submit(stopped), Admit::ok);
  const Outcome o = wait_for(*stopped);
  EXPECT_EQ(o.finish.reason, "stop");
  EXPECT_EQ(o.text, full.text.substr(0, full.text.find(stop)));
  // The context (64) ends generation: 12 prompt + at most 52 new tokens.
  auto ctx = greedy(p, -1);
  ASSERT_EQ(s.submit(ctx), Admit::ok);
  const Outcome c = wait_for(*ctx);
  EXPECT_EQ(c.finish.reason, "length");
  EXPECT_EQ(c.ids.size(), 52u);
  EXPECT_EQ(c.finish.completion_tokens, 52);
}

TEST(Batching, PrefixCacheHitCountsAndMatches) {
  Metrics m;
  Scheduler s(*tiny().model, tiny().tok, {.parallel = 2, .cache_every = 64}, m);
  std::vector<int32_t> shared = prompt_of(300, 4);
  std::vector<int32_t> p1 = shared, p2 = shared;
  p1.push_back(11);
  p2.push_back(12);
  auto a = greedy(p1, 6);
  ASSERT_EQ(s.submit(a), Admit::ok);
  const Outcome oa = wait_for(*a);
  EXPECT_EQ(oa.finish.cached_tokens, 0);
  auto b = greedy(p2, 6);
  ASSERT_EQ(s.submit(b), Admit::ok);
  const Outcome ob = wait_for(*b);
  EXPECT_EQ(ob.finish.cached_tokens, 256);  // the last boundary below 301
  EXPECT_EQ(m.cache_hit_tokens, 256);
  // The same prompt with the cache bypassed answers the same.
  server::GenRequest r = b->request;
  r.use_prefix_cache = false;
  auto c = std::make_shared<server::RequestChannel>(r);
  ASSERT_EQ(s.submit(c), Admit::ok);
  const Outcome oc = wait_for(*c);
  EXPECT_EQ(oc.finish.cached_tokens, 0);
  EXPECT_EQ(oc.ids, ob.ids);
  ASSERT_TRUE(settle(s));
  expect_pool_back_to_full(m);
}

}  // namespace
}  // namespace k3::test
