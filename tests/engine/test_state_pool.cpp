// StatePool: option validation, accounting, paged rows read back, KDA slot isolation, snapshot/
// restore with copy-on-write of a shared tail, exhaustion errors that change nothing, stale ids,
// a randomized run against a shadow model, and no heap allocation after construction.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/alloc_counter.h"
#include "engine/state_pool.h"

namespace k3::test {
namespace {

using K = AttnKind;

// H=2, K=V=4, W=4: P=8, conv history 8*3 floats, S 32 floats. MLA width 6+2=8.
HParams make_hp(std::vector<AttnKind> kinds, int64_t max_positions = 64) {
  HParams hp;
  hp.n_layer = static_cast<int64_t>(kinds.size());
  hp.attn_kind = std::move(kinds);
  hp.kda.n_head = 2;
  hp.kda.head_dim = 4;
  hp.kda.conv_kernel = 4;
  hp.mla.kv_lora_rank = 6;
  hp.mla.qk_rope = 2;
  hp.max_positions = max_positions;
  return hp;
}
HParams mixed_hp(int64_t max_positions = 64) {
  return make_hp({K::kda, K::kda, K::mla, K::kda, K::mla}, max_positions);
}

constexpr int64_t kWidth = 8;
constexpr int64_t kConv = 8 * 3;
constexpr int64_t kState = 2 * 4 * 4;
constexpr int64_t kKdaLayer = 3 * kConv + kState;

size_t expect_slot_bytes(const HParams& hp) {
  return hp.n_layers_of(K::kda) * kKdaLayer * sizeof(float);
}
size_t expect_block_bytes(const HParams& hp, int64_t bt) {
  return hp.n_layers_of(K::mla) * bt * kWidth * sizeof(float);
}

// A budget for exactly `entries` slots and `blocks` blocks (plus a remainder too small for one
// more block, which must be ignored).
StatePoolOptions options(const HParams& hp, int64_t entries, int64_t blocks, int64_t bt) {
  StatePoolOptions o;
  o.max_entries = entries;
  o.block_tokens = bt;
  o.budget_bytes = entries * expect_slot_bytes(hp) + blocks * expect_block_bytes(hp, bt) +
                   expect_block_bytes(hp, bt) / 2 + 1;
  return o;
}

// Runs fn and expects a k3::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& fn, std::vector<std::string> parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) {
      EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
    }
    return;
  }
  ADD_FAILURE() << "expected a k3::Error mentioning \"" << parts.at(0) << "\"";
}

// Never zero, so a row or slot that was zeroed or never written cannot match by accident.
float nonzero(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> mag(0.5f, 1.5f);
  return (rng() & 1) ? mag(rng) : -mag(rng);
}

// The test's own copy of what a sequence or snapshot holds.
struct Shadow {
  std::vector<std::vector<float>> rows;  // per MLA layer: n_past * width floats
  std::vector<float> slot;               // every KDA layer: conv_q, conv_k, conv_v, S
  int64_t n_past() const { return rows.empty() ? 0 : rows[0].size() / kWidth; }
};

Shadow empty_shadow(const StatePool& pool, const HParams& hp) {
  Shadow s;
  s.rows.resize(hp.n_layers_of(K::mla));
  s.slot.assign(pool.slot_bytes() / sizeof(float), 0.0f);
  return s;
}

std::vector<float> read_slot(StatePool& pool, SeqId seq, int64_t n_kda) {
  std::vector<float> out;
  for (int64_t l = 0; l < n_kda; ++l) {
    KdaSlotView v = pool.kda(seq, l);
    for (const float* p : {v.conv_q, v.conv_k, v.conv_v}) out.insert(out.end(), p, p + kConv);
    out.insert(out.end(), v.S, v.S + kState);
  }
  return out;
}

void write_slot(StatePool& pool, SeqId seq, int64_t n_kda, std::mt19937_64& rng, Shadow& s) {
  for (int64_t l = 0; l < n_kda; ++l) {
    KdaSlotView v = pool.kda(seq, l);
    for (float* p : {v.conv_q, v.conv_k, v.conv_v}) {
      for (int64_t i = 0; i < kConv; ++i) p[i] = nonzero(rng);
    }
    for (int64_t i = 0; i < kState; ++i) v.S[i] = nonzero(rng);
  }
  s.slot = read_slot(pool, seq, n_kda);
}

// Reserves n tokens, writes m <= n of them (random, every MLA layer) and advances by m.
void append(StatePool& pool, SeqId seq, int64_t n, int64_t m, std::mt19937_64& rng, Shadow& s) {
  pool.reserve(seq, n);
  const int64_t t0 = pool.n_past(seq);
  for (size_t i = 0; i < s.rows.size(); ++i) {
    for (int64_t t = t0; t < t0 + m; ++t) {
      float* row = pool.mla_row(seq, static_cast<int64_t>(i), t);
      for (int64_t c = 0; c < kWidth; ++c) {
        row[c] = nonzero(rng);
        s.rows[i].push_back(row[c]);
      }
    }
  }
  pool.advance(seq, m);
}

// Bit-for-bit, not ==; empty vectors have null data, which memcmp must not see.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Bit-for-bit comparison of rows [0, n_past) read through `rows` against the shadow.
void expect_rows(const PagedRows& rows, const std::vector<float>& want, const char* what) {
  const int64_t n = static_cast<int64_t>(want.size()) / kWidth;
  for (int64_t t = 0; t < n; ++t) {
    ASSERT_EQ(std::memcmp(rows.row(t), want.data() + t * kWidth, kWidth * sizeof(float)), 0)
        << what << ": row " << t << " differs";
  }
}

void expect_seq(StatePool& pool, SeqId seq, const Shadow& s, int64_t n_kda) {
  ASSERT_EQ(pool.n_past(seq), s.n_past());
  for (size_t i = 0; i < s.rows.size(); ++i) {
    expect_rows(pool.mla(seq, static_cast<int64_t>(i)), s.rows[i], "sequence");
  }
  const std::vector<float> slot = read_slot(pool, seq, n_kda);
  ASSERT_TRUE(same_bits(slot, s.slot)) << "KDA slot differs";
}

// Everything observable about the pool's accounting, to show a failed call changed nothing.
struct Accounting {
  int64_t free_blocks, free_entries;
  std::vector<int32_t> refs;
  std::map<int64_t, std::vector<int32_t>> tables;
  std::map<int64_t, int64_t> n_past;
  bool operator==(const Accounting&) const = default;
};
Accounting accounting(const StatePool& pool, const std::vector<int64_t>& ids) {
  Accounting a{pool.free_blocks(), pool.free_entries(), {}, {}, {}};
  for (int32_t b = 0; b < pool.n_blocks(); ++b) a.refs.push_back(pool.block_refs(b));
  for (int64_t id : ids) {
    a.tables[id] = pool.block_table(id);
    a.n_past[id] = pool.n_past(id);
  }
  return a;
}

class StatePoolTest : public ::testing::Test {
 protected:
  HParams hp = mixed_hp();
  std::mt19937_64 rng{42};
};

TEST_F(StatePoolTest, RejectsBadOptions) {
  StatePoolOptions o = options(hp, 4, 8, 4);
  auto with = [&](auto change) {
    StatePoolOptions c = o;
    change(c);
    return c;
  };
  expect_error([&] { StatePool p(hp, with([](auto& c) { c.budget_bytes = 0; })); },
               {"budget_bytes"});
  expect_error([&] { StatePool p(hp, with([](auto& c) { c.max_entries = 0; })); },
               {"max_entries", "0"});
  expect_error([&] { StatePool p(hp, with([](auto& c) { c.block_tokens = 0; })); },
               {"block_tokens"});
  // Slots come first: a budget one byte short of 4 slots names both sizes.
  expect_error(
      [&] {
        StatePool p(hp, with([&](auto& c) { c.budget_bytes = 4 * expect_slot_bytes(hp) - 1; }));
      },
      {"cannot hold 4 KDA slots", std::to_string(expect_slot_bytes(hp)), "raise the budget"});
  HParams bad = hp;
  bad.attn_kind.pop_back();
  expect_error([&] { StatePool p(bad, o); }, {"attn_kind", "n_layer"});
  bad = hp;
  bad.max_positions = 0;
  expect_error([&] { StatePool p(bad, o); }, {"max_positions"});
  bad = hp;
  bad.kda.head_dim = 0;
  expect_error([&] { StatePool p(bad, o); }, {"KDA"});
}

TEST_F(StatePoolTest, AccountingAndLayout) {
  StatePool pool(hp, options(hp, 3, 10, 4));
  EXPECT_EQ(pool.slot_bytes(), expect_slot_bytes(hp));
  EXPECT_EQ(pool.block_bytes(), expect_block_bytes(hp, 4));
  EXPECT_EQ(pool.n_blocks(), 10);
  EXPECT_EQ(pool.free_blocks(), 10);
  EXPECT_EQ(pool.max_entries(), 3);
  EXPECT_EQ(pool.free_entries(), 3);
  EXPECT_EQ(pool.block_tokens(), 4);
  for (int32_t b = 0; b < 10; ++b) EXPECT_EQ(pool.block_refs(b), 0);
  expect_error([&] { pool.block_refs(10); }, {"block_refs", "10"});

  // Slot layout: per KDA layer conv_q, conv_k, conv_v, S back to back, layers in order.
  const SeqId s = pool.create();
  const float* base = pool.kda(s, 0).conv_q;
  for (int64_t l = 0; l < 3; ++l) {
    const KdaSlotView v = pool.kda(s, l);
    EXPECT_EQ(v.conv_q, base + l * kKdaLayer);
    EXPECT_EQ(v.conv_k, v.conv_q + kConv);
    EXPECT_EQ(v.conv_v, v.conv_k + kConv);
    EXPECT_EQ(v.S, v.conv_v + kConv);
  }
  expect_error([&] { pool.kda(s, 3); }, {"KDA", "3", "out of range"});
  expect_error([&] { pool.mla(s, 2); }, {"MLA", "2", "out of range"});

  // Block layout: [block][mla layer][token][width].
  pool.reserve(s, 6);
  const PagedRows r0 = pool.mla(s, 0), r1 = pool.mla(s, 1);
  EXPECT_EQ(r0.block_tokens, 4);
  EXPECT_EQ(r0.width, kWidth);
  EXPECT_EQ(r0.block_stride, 2 * 4 * kWidth);
  EXPECT_EQ(r1.base, r0.base + 4 * kWidth);
  EXPECT_EQ(pool.mla_row(s, 1, 5), r1.row(5));
  EXPECT_EQ(pool.block_table(s), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pool.free_blocks(), 8);
}

TEST_F(StatePoolTest, CreateUntilExhaustedThenRelease) {
  StatePool pool(hp, options(hp, 4, 8, 4));
  std::vector<SeqId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(pool.create());
  ids.push_back(pool.snapshot(ids[0]));
  EXPECT_EQ(pool.free_entries(), 0);
  const Accounting before = accounting(pool, ids);
  expect_error([&] { pool.create(); },
               {"create", "no free entries", "all 4", "3 sequences, 1 snapshots"});
  expect_error([&] { pool.snapshot(ids[1]); }, {"snapshot", "no free entries"});
  expect_error([&] { pool.restore(ids[3]); }, {"restore", "no free entries"});
  EXPECT_EQ(accounting(pool, ids), before);
  for (SeqId id : ids) EXPECT_EQ(pool.is_live(id), id != ids[3]);

  pool.release(ids[1]);
  EXPECT_EQ(pool.free_entries(), 1);
  const SeqId again = pool.create();
  EXPECT_TRUE(pool.is_live(again));
  EXPECT_NE(again, ids[1]);
  EXPECT_EQ(pool.free_entries(), 0);
}

TEST_F(StatePoolTest, RowsWrittenReadBackThroughPagedRows) {
  StatePool pool(hp, options(hp, 2, 16, 4));
  const SeqId s = pool.create();
  Shadow sh = empty_shadow(pool, hp);
  append(pool, s, 3, 3, rng, sh);  // inside one block
  append(pool, s, 0, 0, rng, sh);  // nothing
  append(pool, s, 7, 7, rng, sh);  // across two boundaries
  append(pool, s, 6, 2, rng, sh);  // reserve ahead, use part
  append(pool, s, 1, 1, rng, sh);  // already reserved: no new block
  EXPECT_EQ(pool.n_past(s), 13);
  EXPECT_EQ(pool.block_table(s).size(), 4u);  // ceil(16 / 4): room for 3 more
  expect_seq(pool, s, sh, 3);

  // The reservation limits both writes and advance.
  EXPECT_NO_THROW(pool.mla_row(s, 0, 15));
  expect_error([&] { pool.mla_row(s, 0, 16); }, {"position 16", "not reserved"});
  expect_error([&] { pool.mla_row(s, 0, -1); }, {"position -1"});
  expect_error([&] { pool.advance(s, 4); }, {"advance", "cannot append 4", "reserve"});
  expect_error([&] { pool.advance(s, -1); }, {"negative"});
  expect_error([&] { pool.reserve(s, -1); }, {"negative"});
  pool.advance(s, 3);
  EXPECT_EQ(pool.n_past(s), 16);
}

TEST_F(StatePoolTest, MaxPositionsIsEnforcedAndChangesNothing) {
  hp = mixed_hp(10);
  StatePool pool(hp, options(hp, 1, 16, 4));
  const SeqId s = pool.create();
  Shadow sh = empty_shadow(pool, hp);
  append(pool, s, 7, 7, rng, sh);
  const Accounting before = accounting(pool, {s});
  expect_error([&] { pool.reserve(s, 4); }, {"max_positions 10", "7 cached + 4 new"});
  expect_error([&] { pool.reserve(s, INT64_MAX); }, {"max_positions"});
  EXPECT_EQ(accounting(pool, {s}), before);
  append(pool, s, 3, 3, rng, sh);  // exactly max_positions
  EXPECT_EQ(pool.block_table(s).size(), 3u);
  expect_seq(pool, s, sh, 3);
}

TEST_F(StatePoolTest, KdaSlotsAreIsolatedAndZeroedOnReuse) {
  StatePool pool(hp, options(hp, 3, 4, 4));
  const SeqId a = pool.create(), b = pool.create();
  Shadow sa = empty_shadow(pool, hp), sb = empty_shadow(pool, hp);
  expect_seq(pool, a, sa, 3);
  write_slot(pool, a, 3, rng, sa);
  expect_seq(pool, b, sb, 3);  // still zero
  write_slot(pool, b, 3, rng, sb);
  expect_seq(pool, a, sa, 3);
  expect_seq(pool, b, sb, 3);

  // A released slot holds old data; the next sequence must still see zeros.
  pool.release(a);
  const SeqId c = pool.create();
  expect_seq(pool, c, empty_shadow(pool, hp), 3);
  expect_seq(pool, b, sb, 3);

  // reset(): zero state and no tokens, same id, blocks returned.
  append(pool, b, 6, 6, rng, sb);
  EXPECT_EQ(pool.free_blocks(), 2);
  pool.reset(b);
  EXPECT_TRUE(pool.is_live(b));
  EXPECT_EQ(pool.free_blocks(), 4);
  EXPECT_TRUE(pool.block_table(b).empty());
  expect_seq(pool, b, empty_shadow(pool, hp), 3);
  expect_error([&] { pool.mla_row(b, 0, 0); }, {"not reserved"});
}

// snapshot at n_past = 6 (tail block half full) -> restore -> both sequences append.
TEST_F(StatePoolTest, SnapshotRestoreCopiesSharedPartialTail) {
  StatePool pool(hp, options(hp, 4, 12, 4));
  const SeqId s = pool.create();
  Shadow ss = empty_shadow(pool, hp);
  write_slot(pool, s, 3, rng, ss);
  append(pool, s, 6, 6, rng, ss);
  const std::vector<int32_t> prefix = pool.block_table(s);
  ASSERT_EQ(prefix.size(), 2u);

  const SnapshotId snap = pool.snapshot(s);
  const Shadow at_snap = ss;
  EXPECT_FALSE(pool.is_live(snap));
  EXPECT_EQ(pool.n_past(snap), 6);
  EXPECT_EQ(pool.block_table(snap), prefix);
  EXPECT_EQ(pool.block_refs(prefix[0]), 2);
  EXPECT_EQ(pool.block_refs(prefix[1]), 2);
  const SeqId r = pool.restore(snap);
  Shadow sr = at_snap;
  expect_seq(pool, r, sr, 3);
  EXPECT_EQ(pool.block_refs(prefix[1]), 3);
  EXPECT_EQ(pool.free_blocks(), 10);

  // Writing the shared tail (or appending into it) without reserve() is refused.
  expect_error([&] { pool.mla_row(r, 0, 6); }, {"not reserved"});
  expect_error([&] { pool.advance(r, 1); }, {"advance"});

  append(pool, s, 3, 3, rng, ss);  // copies the tail, then one fresh block
  EXPECT_EQ(pool.free_blocks(), 8);
  write_slot(pool, s, 3, rng, ss);
  append(pool, r, 5, 5, rng, sr);  // copies the tail too, then one fresh block
  EXPECT_EQ(pool.free_blocks(), 6);
  write_slot(pool, r, 3, rng, sr);

  const std::vector<int32_t> ts = pool.block_table(s), tr = pool.block_table(r);
  EXPECT_EQ(ts[0], prefix[0]);  // full block: shared, never copied
  EXPECT_EQ(tr[0], prefix[0]);
  EXPECT_NE(ts[1], prefix[1]);
  EXPECT_NE(tr[1], prefix[1]);
  EXPECT_NE(ts[1], tr[1]);
  EXPECT_EQ(pool.block_refs(prefix[0]), 3);
  EXPECT_EQ(pool.block_refs(prefix[1]), 1);  // now the snapshot's alone
  expect_seq(pool, s, ss, 3);
  expect_seq(pool, r, sr, 3);

  // The snapshot still holds the prefix bit-for-bit: a second restore reads it back.
  const SeqId r2 = pool.restore(snap);
  expect_seq(pool, r2, at_snap, 3);
  pool.drop(snap);
  pool.release(r2);
  EXPECT_EQ(pool.block_refs(prefix[1]), 0);
}

// snapshot at n_past = 8, an exact multiple of the block: nothing needs copying.
TEST_F(StatePoolTest, SnapshotAtBlockBoundaryNeedsNoCopy) {
  StatePool pool(hp, options(hp, 3, 8, 4));
  const SeqId s = pool.create();
  Shadow ss = empty_shadow(pool, hp);
  append(pool, s, 8, 8, rng, ss);
  const std::vector<int32_t> prefix = pool.block_table(s);
  const SnapshotId snap = pool.snapshot(s);
  const SeqId r = pool.restore(snap);
  Shadow sr = ss;
  EXPECT_EQ(pool.free_blocks(), 6);
  append(pool, s, 1, 1, rng, ss);
  append(pool, r, 2, 2, rng, sr);
  EXPECT_EQ(pool.free_blocks(), 4);  // one fresh block each, no copies
  const std::vector<int32_t> ts = pool.block_table(s), tr = pool.block_table(r);
  ASSERT_EQ(ts.size(), 3u);
  ASSERT_EQ(tr.size(), 3u);
  EXPECT_EQ(std::vector<int32_t>(ts.begin(), ts.begin() + 2), prefix);
  EXPECT_EQ(std::vector<int32_t>(tr.begin(), tr.begin() + 2), prefix);
  EXPECT_NE(ts[2], tr[2]);
  for (int32_t b : prefix) EXPECT_EQ(pool.block_refs(b), 3);
  expect_seq(pool, s, ss, 3);
  expect_seq(pool, r, sr, 3);
}

// snapshot at n_past = 0: only the KDA slot is saved; no blocks are shared.
TEST_F(StatePoolTest, SnapshotOfEmptySequence) {
  StatePool pool(hp, options(hp, 3, 8, 4));
  const SeqId s = pool.create();
  Shadow ss = empty_shadow(pool, hp);
  write_slot(pool, s, 3, rng, ss);
  const SnapshotId snap = pool.snapshot(s);
  EXPECT_TRUE(pool.block_table(snap).empty());
  const SeqId r = pool.restore(snap);
  Shadow sr = ss;
  expect_seq(pool, r, sr, 3);
  append(pool, s, 5, 5, rng, ss);
  append(pool, r, 3, 3, rng, sr);
  write_slot(pool, r, 3, rng, sr);
  EXPECT_EQ(pool.free_blocks(), 5);
  for (int32_t b : pool.block_table(s)) EXPECT_EQ(pool.block_refs(b), 1);
  expect_seq(pool, s, ss, 3);
  expect_seq(pool, r, sr, 3);
}

// A sequence that had reserved past its length when snapshotted keeps its spare blocks, but
// must reserve again before writing into the now-shared tail; KDA state is copied, not shared.
TEST_F(StatePoolTest, SnapshotWithSpareReservation) {
  StatePool pool(hp, options(hp, 3, 8, 4));
  const SeqId s = pool.create();
  Shadow ss = empty_shadow(pool, hp);
  write_slot(pool, s, 3, rng, ss);
  append(pool, s, 10, 5, rng, ss);  // 3 blocks, 5 tokens
  const SnapshotId snap = pool.snapshot(s);
  const Shadow at_snap = ss;
  EXPECT_EQ(pool.block_table(snap).size(), 2u);
  EXPECT_EQ(pool.block_refs(pool.block_table(s)[2]), 1);
  expect_error([&] { pool.mla_row(s, 1, 5); }, {"shared by 2", "reserve"});
  expect_error([&] { pool.advance(s, 1); }, {"shares", "reserve"});
  write_slot(pool, s, 3, rng, ss);
  append(pool, s, 1, 1, rng, ss);  // copies the tail; spare block reused
  EXPECT_EQ(pool.block_table(s).size(), 3u);
  EXPECT_EQ(pool.free_blocks(), 4);
  expect_seq(pool, s, ss, 3);
  const SeqId r = pool.restore(snap);
  expect_seq(pool, r, at_snap, 3);
}

TEST_F(StatePoolTest, BlockExhaustionIsAnErrorAndChangesNothing) {
  StatePool pool(hp, options(hp, 4, 4, 4));
  const SeqId a = pool.create(), b = pool.create();
  Shadow sa = empty_shadow(pool, hp), sb = empty_shadow(pool, hp);
  append(pool, a, 10, 10, rng, sa);  // 3 blocks
  std::vector<int64_t> ids = {a, b};
  Accounting before = accounting(pool, ids);
  expect_error([&] { pool.reserve(b, 8); },
               {"no free MLA blocks", "sequence " + std::to_string(b), "needs 2 more blocks of 4",
                "1 free of 4", "budget " + std::to_string(options(hp, 4, 4, 4).budget_bytes),
                "release sequences or raise the budget"});
  EXPECT_EQ(accounting(pool, ids), before);
  append(pool, b, 4, 4, rng, sb);  // the last block

  // A copy-on-write that cannot get its block fails before touching anything.
  const SnapshotId snap = pool.snapshot(a);
  ids.push_back(snap);
  before = accounting(pool, ids);
  expect_error([&] { pool.reserve(a, 1); }, {"needs 1 more blocks", "copy a shared tail"});
  EXPECT_EQ(accounting(pool, ids), before);
  expect_seq(pool, a, sa, 3);
  expect_seq(pool, b, sb, 3);
  EXPECT_NO_THROW(pool.reserve(a, 0));  // nothing to write: no copy needed

  pool.release(b);
  append(pool, a, 1, 1, rng, sa);
  expect_seq(pool, a, sa, 3);
}

TEST_F(StatePoolTest, StaleAndWrongKindIdsThrow) {
  StatePool pool(hp, options(hp, 2, 4, 4));
  const SeqId a = pool.create();
  pool.release(a);
  const SeqId b = pool.create();  // reuses a's entry under a new id
  EXPECT_NE(a, b);
  EXPECT_FALSE(pool.is_live(a));
  EXPECT_TRUE(pool.is_live(b));
  using Ops = std::vector<std::pair<std::string, std::function<void(int64_t)>>>;
  const Ops seq_ops = {{"reserve", [&](int64_t id) { pool.reserve(id, 1); }},
                       {"advance", [&](int64_t id) { pool.advance(id, 0); }},
                       {"release", [&](int64_t id) { pool.release(id); }},
                       {"reset", [&](int64_t id) { pool.reset(id); }},
                       {"snapshot", [&](int64_t id) { pool.snapshot(id); }},
                       {"kda", [&](int64_t id) { pool.kda(id, 0); }},
                       {"mla", [&](int64_t id) { pool.mla(id, 0); }},
                       {"mla_row", [&](int64_t id) { pool.mla_row(id, 0, 0); }}};
  const Ops snap_ops = {{"restore", [&](int64_t id) { pool.restore(id); }},
                        {"drop", [&](int64_t id) { pool.drop(id); }}};
  const Ops query_ops = {{"n_past", [&](int64_t id) { pool.n_past(id); }},
                         {"block_table", [&](int64_t id) { pool.block_table(id); }}};
  for (SeqId bad : {a, SeqId{-1}, SeqId{12345}, SeqId{INT64_MAX}}) {
    for (const Ops* ops : {&seq_ops, &snap_ops, &query_ops}) {
      for (const auto& [name, op] : *ops) {
        expect_error([&, &op = op] { op(bad); }, {name, "unknown", std::to_string(bad)});
      }
    }
    EXPECT_FALSE(pool.is_live(bad));
  }
  const SnapshotId snap = pool.snapshot(b);
  for (const auto& [name, op] : seq_ops) {
    expect_error([&, &op = op] { op(snap); },
                 {name, "id " + std::to_string(snap), "is a snapshot, not a"});
  }
  for (const auto& [name, op] : snap_ops) {
    expect_error([&, &op = op] { op(b); }, {name, "is a sequence, not a snapshot"});
  }
  pool.drop(snap);
  expect_error([&] { pool.drop(snap); }, {"unknown snapshot"});
  pool.release(b);
  expect_error([&] { pool.release(b); }, {"unknown sequence"});
  EXPECT_EQ(pool.free_entries(), 2);
}

TEST_F(StatePoolTest, ModelWithoutMlaNeedsNoBlocks) {
  hp = make_hp({K::kda, K::kda}, 100);
  StatePoolOptions o;
  o.max_entries = 3;
  o.budget_bytes = 4 * expect_slot_bytes(hp) - 1;  // leftover below a slot: no blocks
  StatePool pool(hp, o);
  EXPECT_EQ(pool.block_bytes(), 0u);
  EXPECT_EQ(pool.n_blocks(), 0);
  const SeqId s = pool.create();
  Shadow ss = empty_shadow(pool, hp);
  write_slot(pool, s, 2, rng, ss);
  pool.reserve(s, 100);
  pool.advance(s, 60);
  expect_error([&] { pool.reserve(s, 41); }, {"max_positions 100"});
  expect_error([&] { pool.advance(s, 41); }, {"cannot append 41"});
  pool.advance(s, 40);
  EXPECT_TRUE(pool.block_table(s).empty());
  expect_error([&] { pool.mla(s, 0); }, {"MLA layer index 0", "0 MLA layers"});
  const SnapshotId snap = pool.snapshot(s);
  const SeqId r = pool.restore(snap);
  EXPECT_EQ(pool.n_past(r), 100);
  const std::vector<float> slot = read_slot(pool, r, 2);
  EXPECT_TRUE(same_bits(slot, ss.slot));
  EXPECT_EQ(pool.free_entries(), 0);
  o.max_entries = 4;
  expect_error([&] { StatePool p(hp, o); }, {"cannot hold 4 KDA slots"});
}

TEST_F(StatePoolTest, ModelWithoutKdaHasEmptySlots) {
  hp = make_hp({K::mla, K::mla, K::mla});
  StatePoolOptions o;
  o.max_entries = 2;
  o.block_tokens = 8;
  o.budget_bytes = 5 * expect_block_bytes(hp, 8) + 7;
  StatePool pool(hp, o);
  EXPECT_EQ(pool.slot_bytes(), 0u);
  EXPECT_EQ(pool.n_blocks(), 5);
  const SeqId s = pool.create();
  Shadow ss = empty_shadow(pool, hp);
  append(pool, s, 13, 13, rng, ss);
  expect_error([&] { pool.kda(s, 0); }, {"KDA", "0 KDA layers"});
  const SnapshotId snap = pool.snapshot(s);
  expect_error([&] { pool.create(); }, {"no free entries", "all 2"});  // entries still limited
  pool.drop(snap);
  const SeqId t = pool.create();
  Shadow st = empty_shadow(pool, hp);
  append(pool, t, 20, 20, rng, st);
  expect_seq(pool, s, ss, 0);
  expect_seq(pool, t, st, 0);
  EXPECT_EQ(pool.free_blocks(), 0);
}

// A budget far larger than memory in use costs nothing until written: the pool reserves
// address space, it does not commit (or zero) it.
TEST_F(StatePoolTest, LargeBudgetIsNotCommitted) {
  auto rss_bytes = [] {
    std::ifstream f("/proc/self/statm");
    int64_t size = 0, resident = 0;
    f >> size >> resident;
    return resident * sysconf(_SC_PAGESIZE);
  };
  hp = mixed_hp(1 << 16);
  StatePoolOptions o;
  o.max_entries = 4;
  o.block_tokens = 1024;  // 64 KiB blocks: bookkeeping stays small
  o.budget_bytes = size_t{16} << 30;
  const int64_t before = rss_bytes();
  StatePool pool(hp, o);
  EXPECT_EQ(pool.n_blocks(), static_cast<int64_t>(((size_t{16} << 30) - 4 * pool.slot_bytes()) /
                                                  pool.block_bytes()));
  const SeqId s = pool.create();
  pool.reserve(s, 1 << 16);
  pool.mla_row(s, 1, (1 << 16) - 1)[0] = 1.0f;
  EXPECT_LT(rss_bytes() - before, int64_t{64} << 20);
}

// Several thousand random operations against a shadow model of every live entry, with
// exhaustion errors along the way; everything is returned at the end.
TEST_F(StatePoolTest, RandomizedFragmentation) {
  hp = mixed_hp(40);
  constexpr int64_t kEntries = 7, kBlocks = 14, kBt = 4;
  StatePool pool(hp, options(hp, kEntries, kBlocks, kBt));
  std::map<SeqId, Shadow> seqs, snaps;
  auto pick = [&](std::map<int64_t, Shadow>& m) {
    auto it = m.begin();
    std::advance(it, rng() % m.size());
    return it;
  };
  auto all_ids = [&] {
    std::vector<int64_t> ids;
    for (auto& [id, s] : seqs) ids.push_back(id);
    for (auto& [id, s] : snaps) ids.push_back(id);
    return ids;
  };
  // Blocks reserve(seq, n) needs (fresh + copy), from the pool's own tables and refcounts.
  auto blocks_needed = [&](SeqId id, int64_t n, bool& cow) {
    const int64_t past = pool.n_past(id);
    const std::vector<int32_t> table = pool.block_table(id);
    cow = n > 0 && past % kBt != 0 && pool.block_refs(table[past / kBt]) > 1;
    return std::max<int64_t>(0, (past + n + kBt - 1) / kBt - int64_t(table.size())) + cow;
  };
  auto check_all = [&] {
    std::vector<int32_t> refs(kBlocks, 0);
    for (int64_t id : all_ids()) {
      for (int32_t b : pool.block_table(id)) ++refs[b];
    }
    int64_t n_free = 0;
    for (int32_t b = 0; b < kBlocks; ++b) {
      ASSERT_EQ(pool.block_refs(b), refs[b]) << "block " << b;
      n_free += refs[b] == 0;
    }
    ASSERT_EQ(pool.free_blocks(), n_free);
    ASSERT_EQ(pool.free_entries(), kEntries - int64_t(seqs.size() + snaps.size()));
    for (auto& [id, s] : seqs) expect_seq(pool, id, s, 3);
    if (seqs.empty()) return;
    // Snapshot rows, read through a live sequence's view with the snapshot's table.
    for (auto& [id, s] : snaps) {
      ASSERT_EQ(pool.n_past(id), s.n_past());
      const std::vector<int32_t> table = pool.block_table(id);
      for (int64_t i = 0; i < 2; ++i) {
        PagedRows r = pool.mla(seqs.begin()->first, i);
        r.blocks = table.data();
        expect_rows(r, s.rows[i], "snapshot");
      }
    }
  };

  // Counts of each event, to show the run exercised them all.
  int64_t n_entry_errors = 0, n_position_errors = 0, n_block_errors = 0, n_cow_errors = 0;
  int64_t n_cow = 0;
  for (int step = 0; step < 6000; ++step) {
    const int op = static_cast<int>(rng() % 100);
    const bool full = int64_t(seqs.size() + snaps.size()) == kEntries;
    // create, snapshot and restore each take an entry; they must fail exactly when none is free.
    auto take_entry = [&](const std::function<int64_t()>& fn, std::map<int64_t, Shadow>& into,
                          const Shadow& s) {
      if (!full) return void(into[fn()] = s);
      expect_error([&] { fn(); }, {"no free entries"});
      ++n_entry_errors;
    };
    if (op < 14) {
      take_entry([&] { return pool.create(); }, seqs, empty_shadow(pool, hp));
    } else if (op < 52 && !seqs.empty()) {  // reserve + write + advance
      auto it = pick(seqs);
      const int64_t n = static_cast<int64_t>(rng() % 12);
      const int64_t m = (rng() % 4 == 0) ? static_cast<int64_t>(rng() % (n + 1)) : n;
      bool cow = false;
      const bool too_long = pool.n_past(it->first) + n > 40;
      const int64_t need = too_long ? 0 : blocks_needed(it->first, n, cow);
      if (too_long || need > pool.free_blocks()) {
        const Accounting before = accounting(pool, all_ids());
        expect_error([&] { pool.reserve(it->first, n); },
                     {too_long ? "max_positions" : "no free MLA blocks"});
        ASSERT_EQ(accounting(pool, all_ids()), before);
        ++(too_long ? n_position_errors : n_block_errors);
        n_cow_errors += cow && pool.free_blocks() > 0;
      } else {
        const std::vector<int32_t> old = pool.block_table(it->first);
        append(pool, it->first, n, m, rng, it->second);
        const std::vector<int32_t> now = pool.block_table(it->first);
        for (size_t j = 0; j < std::min(old.size(), now.size()); ++j) n_cow += old[j] != now[j];
        if (rng() % 2) write_slot(pool, it->first, 3, rng, it->second);
      }
    } else if (op < 62 && !seqs.empty()) {  // release
      auto it = pick(seqs);
      pool.release(it->first);
      seqs.erase(it);
    } else if (op < 74 && !seqs.empty()) {
      auto it = pick(seqs);
      take_entry([&] { return pool.snapshot(it->first); }, snaps, it->second);
    } else if (op < 86 && !snaps.empty()) {
      auto it = pick(snaps);
      take_entry([&] { return pool.restore(it->first); }, seqs, it->second);
    } else if (op < 95 && !snaps.empty()) {  // drop
      auto it = pick(snaps);
      pool.drop(it->first);
      snaps.erase(it);
    } else if (!seqs.empty()) {  // reset
      auto it = pick(seqs);
      pool.reset(it->first);
      it->second = empty_shadow(pool, hp);
    }
    check_all();
    if (HasFatalFailure()) FAIL() << "at step " << step;
  }
  EXPECT_GT(n_entry_errors, 50);
  EXPECT_GT(n_position_errors, 20);
  EXPECT_GT(n_block_errors, 50);
  EXPECT_GT(n_cow_errors, 5);
  EXPECT_GT(n_cow, 50);

  for (auto& [id, s] : seqs) pool.release(id);
  for (auto& [id, s] : snaps) {  // each snapshot still restores to exactly what it saved
    if (pool.free_entries() > 0) {
      const SeqId r = pool.restore(id);
      expect_seq(pool, r, s, 3);
      pool.release(r);
    }
    pool.drop(id);
  }
  EXPECT_EQ(pool.free_blocks(), pool.n_blocks());
  EXPECT_EQ(pool.free_entries(), pool.max_entries());
  for (int32_t b = 0; b < kBlocks; ++b) EXPECT_EQ(pool.block_refs(b), 0);
}

// After construction the pool never touches the heap: a decode loop of reserve + write +
// advance, and every other operation, performs zero allocations.
TEST_F(StatePoolTest, NoHeapAllocationAfterConstruction) {
  const int64_t probe = allocation_count();
  ::operator delete(::operator new(16));
  ASSERT_EQ(allocation_count(), probe + 1) << "the allocation counter is not in effect";

  hp = mixed_hp(256);
  StatePool pool(hp, options(hp, 4, 40, 4));
  float sum = 0.0f;
  bool ok = true;
  const int64_t before = allocation_count();
  {
    SeqId s = pool.create();
    for (int64_t step = 0; step < 32; ++step) {
      pool.reserve(s, 1);
      for (int64_t i = 0; i < 2; ++i) pool.mla_row(s, i, step)[0] = float(step + 1);
      pool.kda(s, int(step % 3)).S[0] += 1.0f;
      pool.advance(s, 1);
      sum += pool.mla(s, 1).row(step)[0];
    }
    pool.reserve(s, 2);  // partly filled tail for the snapshot below
    pool.advance(s, 2);
    const SnapshotId snap = pool.snapshot(s);
    const SeqId r = pool.restore(snap);
    pool.reserve(r, 5);  // copy-on-write
    pool.advance(r, 5);
    pool.reserve(s, 3);  // copy-on-write
    pool.advance(s, 3);
    ok = ok && pool.n_past(r) == 39 && pool.is_live(r) && pool.free_blocks() > 0 &&
         pool.free_entries() == 1 && pool.block_refs(0) == 3;
    pool.reset(r);
    pool.release(r);
    pool.drop(snap);
    pool.release(s);
  }
  const int64_t allocations = allocation_count() - before;
  EXPECT_EQ(allocations, 0);
  EXPECT_TRUE(ok);
  EXPECT_EQ(sum, 32.0f * 33.0f / 2.0f);
  EXPECT_EQ(pool.free_blocks(), 40);
}

}  // namespace
}  // namespace k3::test
