// The batched engine against single-sequence runs on every golden case: several sequences
// (different prefixes of the case's tokens, random chunk sizes, staggered starts, so prompt
// chunks and decode tokens share steps) must give, for every sequence, the logits of running
// that sequence alone with the same chunks (relative L2 <= 1e-6, identical argmax), and the
// float64 reference logits (<= 5e-5). Also: snapshots, logits for chosen rows only, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "k3/k3.h"
#include "k3/npy.h"
#include "model/golden_cases.h"

namespace k3 {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> case_dirs() { return test::golden_case_dirs(); }

using Rows = std::vector<std::vector<float>>;  // one logits row per position

// Worst per-row relative L2 of got against want, and the number of argmax disagreements.
struct Diff {
  double max_rel = 0;
  int64_t argmax_mismatch = 0;
};
Diff diff(const Rows& got, const Rows& want) {
  Diff d;
  for (size_t t = 0; t < want.size(); ++t) {
    double num = 0, den = 0;
    for (size_t i = 0; i < want[t].size(); ++i) {
      const double e = double(got[t][i]) - want[t][i];
      num += e * e;
      den += double(want[t][i]) * want[t][i];
    }
    d.max_rel = std::max(d.max_rel, std::sqrt(num / den));
    auto am = [](const std::vector<float>& r) {
      return std::max_element(r.begin(), r.end()) - r.begin();
    };
    d.argmax_mismatch += am(got[t]) != am(want[t]);
  }
  return d;
}

// One sequence of the test: a prefix of the case's tokens cut into chunks, starting at a step.
struct Plan {
  int64_t start_step = 0;
  std::vector<std::vector<int64_t>> chunks;
};

std::vector<Plan> random_plans(const std::vector<int64_t>& ids, std::mt19937_64& rng) {
  const int64_t N = static_cast<int64_t>(ids.size());
  std::vector<Plan> plans(std::uniform_int_distribution<int>(3, 8)(rng));
  for (size_t i = 0; i < plans.size(); ++i) {
    // Different prefixes: the first sequence takes them all, the others random lengths.
    const int64_t len = i == 0 ? N : std::uniform_int_distribution<int64_t>(1, N)(rng);
    plans[i].start_step = std::uniform_int_distribution<int64_t>(0, 4)(rng);
    for (int64_t t = 0; t < len;) {
      // Mostly single tokens (decode) and short chunks, sometimes a long one.
      const int64_t pick = std::uniform_int_distribution<int64_t>(0, 9)(rng);
      const int64_t n = std::min(len - t, pick < 4 ? 1 : pick < 8 ? pick * 3 : 70);
      plans[i].chunks.emplace_back(ids.begin() + t, ids.begin() + t + n);
      t += n;
    }
  }
  return plans;
}

Rows split_rows(const std::vector<float>& flat, int64_t V) {
  Rows r;
  for (size_t t = 0; t * V < flat.size(); ++t)
    r.emplace_back(flat.begin() + t * V, flat.begin() + (t + 1) * V);
  return r;
}

// All sequences in shared steps: at step k each started, unfinished sequence adds its next chunk.
std::vector<Rows> run_batched(const Model& model, const std::vector<Plan>& plans) {
  Engine engine(model, {.state_budget_bytes = size_t{64} << 20, .max_sequences = 8});
  std::vector<SeqId> ids;
  for (size_t i = 0; i < plans.size(); ++i) ids.push_back(engine.create_sequence());
  std::vector<Rows> out(plans.size());
  std::vector<size_t> next(plans.size(), 0);
  for (int64_t step = 0;; ++step) {
    Batch b;
    std::vector<size_t> in_step;
    for (size_t i = 0; i < plans.size(); ++i) {
      if (step < plans[i].start_step || next[i] == plans[i].chunks.size()) continue;
      b.add(ids[i], plans[i].chunks[next[i]++], Batch::Logits::all);
      in_step.push_back(i);
    }
    if (in_step.empty()) {
      if (std::all_of(plans.begin(), plans.end(),
                      [&](const Plan& p) { return p.start_step <= step; }))
        break;
      continue;
    }
    Rows rows = split_rows(engine.step(b), model.vocab_size());
    size_t r = 0;
    for (size_t i : in_step) {
      const size_t n = plans[i].chunks[next[i] - 1].size();
      out[i].insert(out[i].end(), rows.begin() + r, rows.begin() + r + n);
      r += n;
    }
  }
  return out;
}

// The same chunks for one sequence, each in a step of its own.
Rows run_alone(const Model& model, const Plan& plan) {
  Sequence seq(model);
  Rows out;
  for (const auto& chunk : plan.chunks) {
    Rows r = split_rows(seq.prefill(chunk), model.vocab_size());
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

class Batched : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = Model::load(GetParam());
    std::ifstream f(GetParam() + "/tokens.json");
    ids_ = nlohmann::json::parse(f).get<std::vector<int64_t>>();
    NpyArray a = npy_read_f32(GetParam() + "/logits_prefill.npy");
    ref_ = split_rows(a.data, model_->vocab_size());
  }
  std::unique_ptr<Model> model_;
  std::vector<int64_t> ids_;
  Rows ref_;
};

TEST_P(Batched, EverySequenceMatchesItsLoneRunAndTheReference) {
  for (uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 rng(seed);
    const std::vector<Plan> plans = random_plans(ids_, rng);
    const std::vector<Rows> got = run_batched(*model_, plans);
    double worst_alone = 0, worst_ref = 0;
    for (size_t i = 0; i < plans.size(); ++i) {
      const Rows alone = run_alone(*model_, plans[i]);
      ASSERT_EQ(got[i].size(), alone.size());
      const Diff a = diff(got[i], alone);
      const Diff r = diff(got[i], Rows(ref_.begin(), ref_.begin() + got[i].size()));
      EXPECT_LE(a.max_rel, 1e-6) << "seed " << seed << " sequence " << i;
      EXPECT_EQ(a.argmax_mismatch, 0) << "seed " << seed << " sequence " << i;
      EXPECT_LE(r.max_rel, 5e-5) << "seed " << seed << " sequence " << i;
      EXPECT_EQ(r.argmax_mismatch, 0) << "seed " << seed << " sequence " << i;
      worst_alone = std::max(worst_alone, a.max_rel);
      worst_ref = std::max(worst_ref, r.max_rel);
    }
    std::printf("    seed %llu, %zu sequences: vs alone %.3e, vs reference %.3e\n",
                (unsigned long long)seed, plans.size(), worst_alone, worst_ref);
  }
}

TEST_P(Batched, SnapshotRestoreContinuesLikeTheUninterruptedRun) {
  const int64_t N = static_cast<int64_t>(ids_.size());
  if (N < 2) GTEST_SKIP() << "one-token case";
  Engine engine(*model_, {.state_budget_bytes = size_t{64} << 20, .max_sequences = 4});
  const int64_t V = model_->vocab_size();
  for (int64_t k : {int64_t{1}, N / 2, N - 1}) {
    const std::vector<int64_t> head(ids_.begin(), ids_.begin() + k),
        tail(ids_.begin() + k, ids_.end());
    SeqId a = engine.create_sequence();
    Batch b;
    b.add(a, head, Batch::Logits::none);
    engine.step(b);
    const SnapshotId snap = engine.snapshot(a);
    b.clear();
    b.add(a, tail, Batch::Logits::all);
    const std::vector<float> want = engine.step(b);  // the uninterrupted run continues
    SeqId c = engine.restore(snap);
    ASSERT_EQ(engine.n_past(c), k);
    b.clear();
    b.add(c, tail, Batch::Logits::all);
    const std::vector<float> got = engine.step(b);
    EXPECT_EQ(got, want) << "restored at k = " << k;  // same inputs, same arithmetic: exact
    const Diff r = diff(split_rows(got, V), Rows(ref_.begin() + k, ref_.end()));
    EXPECT_LE(r.max_rel, 5e-5);
    engine.release(a);
    engine.release(c);
    engine.drop(snap);
  }
  EXPECT_EQ(engine.free_sequences(), 4);
}

TEST_P(Batched, LogitsOnlyForTheRowsAskedFor) {
  Engine engine(*model_, {.state_budget_bytes = size_t{64} << 20, .max_sequences = 2});
  SeqId a = engine.create_sequence();
  Batch b;
  b.add(a, ids_);  // Logits::last
  const std::vector<float> last = engine.step(b);
  ASSERT_EQ(static_cast<int64_t>(last.size()), model_->vocab_size());
  const Diff r = diff({last}, {ref_.back()});
  EXPECT_LE(r.max_rel, 5e-5);
  EXPECT_EQ(r.argmax_mismatch, 0);
}

// step_view: the same logits as step(), left in the engine's buffer (reused by the next step,
// grown when a step asks for more rows).
TEST_P(Batched, StepViewGivesTheLogitsOfStep) {
  Engine engine(*model_, {.state_budget_bytes = size_t{64} << 20, .max_sequences = 4});
  Engine twin(*model_, {.state_budget_bytes = size_t{64} << 20, .max_sequences = 4});
  const SeqId a = engine.create_sequence(), c = engine.create_sequence();
  const SeqId ta = twin.create_sequence(), tc = twin.create_sequence();
  const int64_t V = model_->vocab_size(), n = static_cast<int64_t>(ids_.size());
  const std::vector<int64_t> head(ids_.begin(), ids_.begin() + (n + 1) / 2);
  Batch b, tb;
  b.add(a, head);
  tb.add(ta, head);
  const std::span<const float> first = engine.step_view(b);
  EXPECT_EQ(std::vector<float>(first.begin(), first.end()), twin.step(tb));
  // A second step with more logits rows (both sequences, all rows of one).
  const std::vector<int64_t> rest(ids_.begin() + (n + 1) / 2, ids_.end());
  const std::vector<int64_t> one{ids_[0]};
  b.clear();
  tb.clear();
  if (!rest.empty()) {
    b.add(a, rest, Batch::Logits::all);
    tb.add(ta, rest, Batch::Logits::all);
  }
  b.add(c, one);
  tb.add(tc, one);
  const std::span<const float> second = engine.step_view(b);
  ASSERT_EQ(static_cast<int64_t>(second.size()), static_cast<int64_t>(b.logit_rows.size()) * V);
  EXPECT_EQ(std::vector<float>(second.begin(), second.end()), twin.step(tb));
}

std::string name_of(const ::testing::TestParamInfo<std::string>& info) {
  return fs::path(info.param).filename().string();
}

INSTANTIATE_TEST_SUITE_P(Cases, Batched, ::testing::ValuesIn(case_dirs()), name_of);

// Invalid batches are refused with a message naming the problem, and change nothing.
TEST(BatchErrors, BadBatchesAreRefusedAndStateIsKept) {
  auto model = Model::load(K3_SOURCE_DIR "/tests/data/models/c1_tiny");
  Engine engine(*model, {.state_budget_bytes = size_t{8} << 20, .max_sequences = 2});
  SeqId a = engine.create_sequence();
  auto expect_error = [&](const Batch& b, const std::string& what) {
    try {
      engine.step(b);
      ADD_FAILURE() << "no error for: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_EQ(engine.n_past(a), 0);
  };
  Batch b;
  expect_error(b, "no sequences");
  try {
    engine.step_view(b);
    ADD_FAILURE() << "step_view: no error for an empty batch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no sequences"), std::string::npos) << e.what();
  }
  b.add(a, std::vector<int64_t>{1, model->vocab_size()});
  expect_error(b, "outside the vocabulary");
  b.clear();
  b.add(a, std::vector<int64_t>{1});
  b.add(a, std::vector<int64_t>{2});
  expect_error(b, "appears twice");
  b.clear();
  b.add(a + 1000, std::vector<int64_t>{1});
  expect_error(b, "does not exist");
  b.clear();
  b.add(a, std::vector<int64_t>{});
  expect_error(b, "no new tokens");
  b.clear();
  b.add(a, std::vector<int64_t>{1, 2});
  b.logit_rows.push_back(5);
  expect_error(b, "logit row 5");
  const SnapshotId s = engine.snapshot(a);
  b.clear();
  b.add(s, std::vector<int64_t>{1});
  expect_error(b, "does not exist");
}

}  // namespace
}  // namespace k3

namespace k3 {
namespace {

// Running out of cache blocks or sequence slots is an error naming what ran out; nothing is
// advanced, and the engine keeps working once room is made.
TEST(BatchErrors, ExhaustedBudgetOrSlotsAreErrorsAndTheEngineRecovers) {
  auto model = Model::load(K3_SOURCE_DIR "/tests/data/models/c1_tiny");
  Engine engine(*model, {Engine::budget_for(*model, 2, 20), 2});  // 2 slots, 4 blocks of 16
  const SeqId a = engine.create_sequence(), b = engine.create_sequence();
  try {
    engine.create_sequence();
    ADD_FAILURE() << "a third sequence fit in two slots";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no free entries"), std::string::npos) << e.what();
  }
  const std::vector<int64_t> twenty(20, 3), sixteen(16, 4);
  Batch batch;
  batch.add(a, twenty);
  batch.add(b, twenty);
  engine.step(batch);  // 2 blocks each: the pool is full
  batch.clear();
  batch.add(a, sixteen);
  try {
    engine.step(batch);
    ADD_FAILURE() << "36 tokens fit in a full pool";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("free MLA cache blocks"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.n_past(a), 20);
  EXPECT_EQ(engine.free_blocks(), 0);
  engine.release(b);  // 2 blocks free again
  const SeqId c = engine.create_sequence();
  batch.clear();
  batch.add(a, sixteen);                      // fits (1 block) ...
  batch.add(c, std::vector<int64_t>(40, 5));  // ... but not with this (3 blocks)
  try {
    engine.step(batch);
    ADD_FAILURE() << "4 blocks fit in 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 4 free MLA cache blocks"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(engine.free_blocks(), 2);  // nothing was reserved for a
  batch.clear();
  batch.add(a, sixteen);
  const std::vector<float> logits = engine.step(batch);  // room again
  EXPECT_EQ(engine.n_past(a), 36);
  EXPECT_EQ(static_cast<int64_t>(logits.size()), model->vocab_size());
}

}  // namespace
}  // namespace k3
