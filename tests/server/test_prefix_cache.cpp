// The prefix cache on a real engine: a hit continues exactly where a cold prefill through the
// same boundary would be, and the failure modes other engines have shipped are handled:
// a snapshot that was never written (or was dropped), a snapshot of another state layout, a
// prompt that is an exact multiple of the block size, a shared prefix ending inside a block,
// eviction under the budget without leaking pool entries.
#include <algorithm>
#include <cmath>
#include <random>

#include "k3/engine.h"
#include "k3/error.h"
#include "server/prefix_cache.h"
#include "server/server_fixture.h"

namespace k3::test {
namespace {

using server::CacheLayout;
using server::PrefixCache;

std::vector<int32_t> random_ids(size_t n, uint32_t seed, int32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return v;
}

class PrefixCacheTest : public ::testing::Test {
 protected:
  static constexpr int64_t kBlock = 16, kEvery = 32;
  PrefixCacheTest()
      : engine(*tiny().model, {.state_budget_bytes = Engine::budget_for(*tiny().model, 24, 512),
                               .max_sequences = 24,
                               .block_tokens = kBlock}),
        layout(server::layout_of(engine, kBlock, kEvery)),
        cache(engine, layout, 16 << 20, 16) {}

  // Feeds ids[from, to) to seq; returns the logits of the last one.
  std::vector<float> feed(SeqId seq, const std::vector<int32_t>& ids, size_t from, size_t to) {
    Batch b;
    std::vector<int64_t> chunk(ids.begin() + static_cast<std::ptrdiff_t>(from),
                               ids.begin() + static_cast<std::ptrdiff_t>(to));
    b.add(seq, chunk);
    return engine.step(b);
  }
  // Prefills `ids` in chunks ending at the cache boundaries, caching each; releases the seq.
  void warm(const std::vector<int32_t>& ids) {
    const SeqId s = engine.create_sequence();
    for (size_t at = 0; at + kEvery <= ids.size(); at += kEvery) {
      feed(s, ids, at, at + kEvery);
      cache.insert(std::span(ids).subspan(0, at + kEvery), s, layout);
    }
    engine.release(s);
  }
  // The cold answer with the same chunk boundaries as a hit at n_hit.
  std::vector<float> cold(const std::vector<int32_t>& ids, size_t n_hit) {
    const SeqId s = engine.create_sequence();
    for (size_t at = 0; at < n_hit; at += kEvery) feed(s, ids, at, at + kEvery);
    std::vector<float> l = feed(s, ids, n_hit, ids.size());
    engine.release(s);
    return l;
  }
  std::vector<float> via_cache(const std::vector<int32_t>& ids, int64_t expect_hit) {
    server::CacheHit h = cache.start(ids);
    EXPECT_EQ(h.n_tokens, expect_hit);
    EXPECT_EQ(engine.n_past(h.seq), h.n_tokens);
    std::vector<float> l = feed(h.seq, ids, static_cast<size_t>(h.n_tokens), ids.size());
    engine.release(h.seq);
    return l;
  }
  static float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    float d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
    return d;
  }
  void expect_no_leak() {
    EXPECT_EQ(engine.free_sequences() + cache.entries(), 24);
    cache.clear();
    EXPECT_EQ(engine.free_sequences(), 24);
  }

  Engine engine;
  CacheLayout layout;
  PrefixCache cache;
  const int32_t vocab = static_cast<int32_t>(tiny().model->vocab_size());
};

TEST_F(PrefixCacheTest, HitGivesTheColdLogits) {
  const std::vector<int32_t> ids = random_ids(100, 1, vocab);
  warm(ids);
  EXPECT_EQ(cache.entries(), 3);  // 32, 64, 96
  const std::vector<float> hit = via_cache(ids, 96);
  EXPECT_LE(max_abs_diff(hit, cold(ids, 96)), 1e-6f);
  // Against one prefill of the whole prompt (other chunking inside KDA): the same model output
  // up to fp32 rounding.
  const std::vector<float> one_chunk = cold(ids, 0);
  float ref = 0;
  for (float v : one_chunk) ref = std::max(ref, std::fabs(v));
  EXPECT_LE(max_abs_diff(hit, one_chunk), 1e-5f * ref);
  expect_no_leak();
}

TEST_F(PrefixCacheTest, ExactMultipleOfTheBlockHitsOneBoundaryEarlier) {
  const std::vector<int32_t> ids = random_ids(128, 2, vocab);  // 8 blocks, 4 boundaries
  warm(ids);
  EXPECT_EQ(cache.longest_match(ids), 96);  // the 128 entry would leave nothing to prefill
  EXPECT_LE(max_abs_diff(via_cache(ids, 96), cold(ids, 96)), 1e-6f);
  expect_no_leak();
}

TEST_F(PrefixCacheTest, SharedPrefixEndingInsideABlock) {
  const std::vector<int32_t> a = random_ids(120, 3, vocab);
  warm(a);
  std::vector<int32_t> b(a.begin(), a.begin() + 75);  // shares 75 tokens: inside block 4
  const std::vector<int32_t> tail = random_ids(30, 4, vocab);
  b.insert(b.end(), tail.begin(), tail.end());
  if (b[75] == a[75]) b[75] = (b[75] + 1) % vocab;
  EXPECT_LE(max_abs_diff(via_cache(b, 64), cold(b, 64)), 1e-6f);
  // A prompt that differs in its first token shares nothing.
  std::vector<int32_t> c = a;
  c[0] = (c[0] + 1) % vocab;
  EXPECT_EQ(cache.longest_match(c), 0);
  EXPECT_LE(max_abs_diff(via_cache(c, 0), cold(c, 0)), 1e-6f);
  expect_no_leak();
}

TEST_F(PrefixCacheTest, SnapshotNeverWrittenOrDroppedFallsBackCold) {
  const std::vector<int32_t> ids = random_ids(80, 5, vocab);
  cache.adopt(std::span(ids).subspan(0, 64), 987654);  // an id the engine never issued
  EXPECT_EQ(cache.longest_match(ids), 64);
  EXPECT_LE(max_abs_diff(via_cache(ids, 0), cold(ids, 0)), 1e-6f);
  EXPECT_EQ(cache.entries(), 0);  // the broken entry is gone
  // A real snapshot dropped behind the cache's back.
  const SeqId s = engine.create_sequence();
  feed(s, ids, 0, 32);
  const SnapshotId snap = engine.snapshot(s);
  engine.release(s);
  engine.drop(snap);
  cache.adopt(std::span(ids).subspan(0, 32), snap);
  EXPECT_LE(max_abs_diff(via_cache(ids, 0), cold(ids, 0)), 1e-6f);
  EXPECT_EQ(cache.entries(), 0);
  expect_no_leak();
}

TEST_F(PrefixCacheTest, OtherLayoutIsNeverUsed) {
  const std::vector<int32_t> ids = random_ids(70, 6, vocab);
  const SeqId s = engine.create_sequence();
  feed(s, ids, 0, 64);
  CacheLayout other = layout;
  other.block_tokens = 32;
  cache.insert(std::span(ids).subspan(0, 64), s, other);
  other = layout;
  other.model = "another model";
  cache.insert(std::span(ids).subspan(0, 64), s, other);
  EXPECT_EQ(cache.entries(), 0);
  EXPECT_NE(server::layout_of(engine, 32, 64), server::layout_of(engine, 16, 64));
  // Inserting a prefix the sequence does not hold, or one off a boundary, is refused loudly.
  EXPECT_THROW(cache.insert(std::span(ids).subspan(0, 32), s, layout), Error);
  EXPECT_THROW(cache.insert(std::span(ids).subspan(0, 40), s, layout), Error);
  engine.release(s);
  expect_no_leak();
}

TEST_F(PrefixCacheTest, LruEvictionUnderTheBudget) {
  // Room for two entries of 64 tokens (slot + 4 blocks each), not three.
  const size_t slot = Engine::budget_for(*tiny().model, 1, 0, kBlock) - 1;
  const size_t block = Engine::budget_for(*tiny().model, 1, kBlock, kBlock) - 1 - slot;
  PrefixCache small(engine, server::layout_of(engine, kBlock, 64), 2 * (slot + 4 * block) + 1, 8);
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 3; ++i) {
    prompts.push_back(random_ids(70, 10 + i, vocab));
    const SeqId s = engine.create_sequence();
    feed(s, prompts.back(), 0, 64);
    small.insert(std::span(prompts.back()).subspan(0, 64), s, small.layout());
    engine.release(s);
    if (i == 1) {  // use entry 0: entry 1 is now the least recently used
      const server::CacheHit h = small.start(prompts[0]);
      EXPECT_EQ(h.n_tokens, 64);
      engine.release(h.seq);
    }
  }
  EXPECT_EQ(small.entries(), 2);
  EXPECT_LE(small.bytes(), 2 * (slot + 4 * block) + 1);
  EXPECT_EQ(small.longest_match(prompts[1]), 0);
  EXPECT_EQ(small.longest_match(prompts[0]), 64);
  EXPECT_EQ(small.longest_match(prompts[2]), 64);
  EXPECT_EQ(engine.free_sequences(), 24 - 2);
  small.clear();
  EXPECT_EQ(engine.free_sequences(), 24);
}

}  // namespace
}  // namespace k3::test
