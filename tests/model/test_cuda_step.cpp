// The CUDA backend's step against the CPU fp32 step on every golden case (skipped without a
// device): several sequences in shared steps with mixed prefill chunks and decode tokens, per
// row relative L2 of the logits <= 1e-2 and argmax agreement >= 99% (the reached values are
// printed); decode after a one-token prefill equals the whole-prompt prefill within the same
// bounds; a restored snapshot continues like the uninterrupted run; the float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <tuple>

#include "backend/cuda/cuda.h"
#include "k3/k3.h"
#include "k3/npy.h"
#include "model/golden_cases.h"
#include "model/near_ties.h"

namespace k3 {
namespace {

using Rows = std::vector<std::vector<float>>;

struct Agreement {
  double max_rel = 0;
  int64_t rows = 0, argmax_same = 0;
  void add(const Rows& got, const Rows& want) {
    for (size_t t = 0; t < want.size(); ++t) {
      double num = 0, den = 0;
      for (size_t i = 0; i < want[t].size(); ++i) {
        const double e = double(got[t][i]) - want[t][i];
        num += e * e;
        den += double(want[t][i]) * want[t][i];
      }
      max_rel = std::max(max_rel, std::isfinite(num) ? std::sqrt(num / den) : INFINITY);
      auto am = [](const std::vector<float>& r) {
        return std::max_element(r.begin(), r.end()) - r.begin();
      };
      ++rows;
      argmax_same += am(got[t]) == am(want[t]);
    }
  }
  double argmax_rate() const { return rows == 0 ? 1.0 : double(argmax_same) / double(rows); }
};

// The totals over all cases, printed once at the end.
Agreement& totals() {
  static Agreement a;
  return a;
}

Rows split_rows(const std::vector<float>& flat, int64_t V) {
  Rows r;
  for (size_t t = 0; t * V < flat.size(); ++t)
    r.emplace_back(flat.begin() + t * V, flat.begin() + (t + 1) * V);
  return r;
}

// Sequence i: a prefix of the tokens in random chunks (mostly decode tokens), from step start.
struct Plan {
  int64_t start = 0;
  std::vector<std::vector<int64_t>> chunks;
};

std::vector<Plan> plans_for(const std::vector<int64_t>& ids, std::mt19937_64& rng) {
  const int64_t N = static_cast<int64_t>(ids.size());
  std::vector<Plan> plans(5);
  for (size_t i = 0; i < plans.size(); ++i) {
    const int64_t len = i == 0 ? N : std::uniform_int_distribution<int64_t>(1, N)(rng);
    plans[i].start = std::uniform_int_distribution<int64_t>(0, 3)(rng);
    for (int64_t t = 0; t < len;) {
      const int64_t pick = std::uniform_int_distribution<int64_t>(0, 9)(rng);
      const int64_t n = std::min(len - t, pick < 5 ? 1 : pick < 9 ? pick * 3 : 64);
      plans[i].chunks.emplace_back(ids.begin() + t, ids.begin() + t + n);
      t += n;
    }
  }
  return plans;
}

std::vector<Rows> run_batched(const Model& model, const std::vector<Plan>& plans,
                              const char* device) {
  Engine engine(model, {.state_budget_bytes = size_t{64} << 20,
                        .max_sequences = static_cast<int64_t>(plans.size()),
                        .device = device});
  std::vector<SeqId> ids;
  for (size_t i = 0; i < plans.size(); ++i) ids.push_back(engine.create_sequence());
  std::vector<Rows> out(plans.size());
  std::vector<size_t> next(plans.size(), 0);
  for (int64_t step = 0;; ++step) {
    Batch b;
    std::vector<size_t> in_step;
    for (size_t i = 0; i < plans.size(); ++i) {
      if (step < plans[i].start || next[i] == plans[i].chunks.size()) continue;
      b.add(ids[i], plans[i].chunks[next[i]++], Batch::Logits::all);
      in_step.push_back(i);
    }
    if (in_step.empty()) {
      if (step > 4) break;
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

class CudaStep : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    model_ = Model::load(GetParam());
    std::ifstream f(GetParam() + "/tokens.json");
    ids_ = nlohmann::json::parse(f).get<std::vector<int64_t>>();
    ref_ = split_rows(npy_read_f32(GetParam() + "/logits_prefill.npy").data, model_->vocab_size());
  }
  std::unique_ptr<Model> model_;
  std::vector<int64_t> ids_;
  Rows ref_;
};

TEST_P(CudaStep, BatchedMixedStepsMatchTheCpu) {
  Agreement vs_cpu, vs_ref;
  for (uint64_t seed : {1, 2}) {
    std::mt19937_64 rng(seed);
    const std::vector<Plan> plans = plans_for(ids_, rng);
    const std::vector<Rows> gpu = run_batched(*model_, plans, "cuda");
    const std::vector<Rows> cpu = run_batched(*model_, plans, "cpu");
    for (size_t i = 0; i < plans.size(); ++i) {
      ASSERT_EQ(gpu[i].size(), cpu[i].size());
      vs_cpu.add(gpu[i], cpu[i]);
      vs_ref.add(gpu[i], Rows(ref_.begin(), ref_.begin() + gpu[i].size()));
    }
  }
  totals().max_rel = std::max(totals().max_rel, vs_cpu.max_rel);
  totals().rows += vs_cpu.rows;
  totals().argmax_same += vs_cpu.argmax_same;
  std::printf("    gpu vs cpu: max rel %.3e, argmax %lld/%lld; gpu vs float64 ref: max rel %.3e\n",
              vs_cpu.max_rel, (long long)vs_cpu.argmax_same, (long long)vs_cpu.rows,
              vs_ref.max_rel);
  std::printf("    all cases so far: max rel %.3e, argmax %lld/%lld\n", totals().max_rel,
              (long long)totals().argmax_same, (long long)totals().rows);
  EXPECT_LE(vs_cpu.max_rel, 1e-2);
  EXPECT_GE(vs_cpu.argmax_rate(), 0.99);
}

// bf16 precision on the device (k3::set_cpu_precision sets the device's too: the GEMMs' and the
// routed experts' inputs rounded once, decode steps included), stated as the CPU's is
// (test_golden.cpp, TrainedDefault): the trained default model against its float64 reference,
// prefill in one step and token by token, per row relative L2 within the CPU's bf16 bound, under
// the near-tie rules of near_ties.h. Measured on the device: 8.9e-3 (prefill) on the model of
// 2026-12-06 05:45; 9.28e-3 prefill, 2.31e-3 decode on the one shipped at 08:55 (H100); 4.1e-3
// prefill, 2.3e-3 decode on the one shipped third on 2026-12-07 (H100). The reshaped one shipped
// after it (72 experts top-6) was not run here (no device time was left in the session that
// trained it; the CPU paths measure 1.7e-3 to 3.4e-3 on it). (The
// random golden cases amplify any rounding: bf16 moves their logits by up to 0.75 on the CPU too,
// so they hold no bf16 tolerance.)
TEST(CudaBf16, TrainedDefaultMatchesReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const std::string data = K3_SOURCE_DIR "/tests/data/trained_default/";
  auto model = Model::load(K3_SOURCE_DIR "/models/default");
  const int64_t V = model->vocab_size();
  std::ifstream f(data + "tokens.json");
  const auto ids = nlohmann::json::parse(f).get<std::vector<int64_t>>();
  const std::string name = cpu_precision_name();  // "fp32", "fp32 (AMX)", "bf16 (…)", "q8 (…)"
  set_cpu_precision("bf16");
  Engine engine(*model,
                {.state_budget_bytes = size_t{64} << 20, .max_sequences = 2, .device = "cuda"});
  Batch b;
  b.add(engine.create_sequence(), ids, Batch::Logits::all);
  const Rows prefill = split_rows(engine.step(b), V);
  const SeqId s = engine.create_sequence();
  Rows decode;
  for (int64_t id : ids) {
    Batch one;
    one.add(s, std::span(&id, 1));
    decode.push_back(engine.step(one));
  }
  set_cpu_precision(name.substr(0, name.find(' ')));
  auto flat = [](const Rows& rows) {
    std::vector<float> out;
    for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
    return out;
  };
  const test::NearTies ties = test::NearTies::load(data + "ties.json");
  ASSERT_EQ(ties.router_margin.size(), ids.size());
  constexpr double kBf16Tol = 2.5e-2;  // as test_golden.cpp's
  for (const auto& [what, got, want] :
       {std::tuple{"bf16 on the device, prefill", &prefill, "logits_prefill.npy"},
        std::tuple{"bf16 on the device, decode", static_cast<const Rows*>(&decode),
                   "logits_decode.npy"}}) {
    const std::vector<float> g = flat(*got);
    const std::vector<float> w = npy_read_f32(data + want).data;
    ASSERT_EQ(g.size(), w.size()) << what;
    ties.expect_close(g.data(), w.data(), V, what, kBf16Tol);
  }
}

TEST_P(CudaStep, DecodeEqualsPrefill) {
  Engine engine(*model_,
                {.state_budget_bytes = size_t{64} << 20, .max_sequences = 2, .device = "cuda"});
  const int64_t V = model_->vocab_size();
  SeqId a = engine.create_sequence(), b = engine.create_sequence();
  Batch batch;
  batch.add(a, ids_, Batch::Logits::all);
  const Rows prefill = split_rows(engine.step(batch), V);
  Rows decode;
  for (int64_t id : ids_) {
    batch.clear();
    batch.add(b, std::span(&id, 1));
    Rows r = split_rows(engine.step(batch), V);
    decode.push_back(r[0]);
  }
  Agreement d;
  d.add(decode, prefill);
  std::printf("    decode vs prefill (gpu): max rel %.3e, argmax %lld/%lld\n", d.max_rel,
              (long long)d.argmax_same, (long long)d.rows);
  EXPECT_LE(d.max_rel, 1e-2);
  EXPECT_GE(d.argmax_rate(), 0.99);
}

TEST_P(CudaStep, SnapshotRestoreContinuesLikeTheUninterruptedRun) {
  const int64_t N = static_cast<int64_t>(ids_.size());
  if (N < 2) GTEST_SKIP() << "one-token case";
  Engine engine(*model_,
                {.state_budget_bytes = size_t{64} << 20, .max_sequences = 3, .device = "cuda"});
  const int64_t k = N / 2;
  const std::vector<int64_t> head(ids_.begin(), ids_.begin() + k),
      tail(ids_.begin() + k, ids_.end());
  SeqId a = engine.create_sequence();
  Batch b;
  b.add(a, head, Batch::Logits::none);
  engine.step(b);
  const SnapshotId snap = engine.snapshot(a);
  b.clear();
  b.add(a, tail, Batch::Logits::all);
  const Rows want = split_rows(engine.step(b), model_->vocab_size());
  SeqId c = engine.restore(snap);
  b.clear();
  b.add(c, tail, Batch::Logits::all);
  const Rows got = split_rows(engine.step(b), model_->vocab_size());
  Agreement d;
  d.add(got, want);
  EXPECT_LE(d.max_rel, 1e-6);  // the same launches on the same inputs
  EXPECT_EQ(d.argmax_same, d.rows);
}

// Three sequences prefilled to different lengths, then decode steps over changing subsets of
// them (the batch shrinks and grows, contexts cross cache blocks): the graphed engine returns
// the launched engine's logits bit for bit, and really replayed graphs.
TEST_P(CudaStep, GraphedDecodeEqualsLaunchedDecodeBitForBit) {
  const int64_t N = static_cast<int64_t>(ids_.size());
  auto run = [&](bool graphs) {
    Engine engine(*model_, {.state_budget_bytes = size_t{64} << 20,
                            .max_sequences = 3,
                            .device = "cuda",
                            .cuda_graphs = graphs});
    std::vector<SeqId> seqs;
    std::vector<float> all;
    for (int64_t i = 0; i < 3; ++i) {
      seqs.push_back(engine.create_sequence());
      Batch b;
      const int64_t n = std::max<int64_t>(1, N * (i + 1) / 4);
      b.add(seqs.back(), std::span(ids_.data(), static_cast<size_t>(n)));
      const std::vector<float> l = engine.step(b);
      all.insert(all.end(), l.begin(), l.end());
    }
    for (int64_t step = 0; step < 40; ++step) {
      Batch b;
      for (int64_t i = 0; i < 3; ++i) {
        if (step % 5 == 3 && i == 1) continue;  // every fifth step without sequence 1
        const int64_t id = ids_[static_cast<size_t>((step * 7 + i) % N)];
        b.add(seqs[i], std::span(&id, 1));
      }
      const std::vector<float> l = engine.step(b);
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  const CudaGraphStats before = cuda_graph_stats();
  const std::vector<float> launched = run(false);
  const CudaGraphStats mid = cuda_graph_stats();
  EXPECT_EQ(mid.captures + mid.replays + mid.eager, before.captures + before.replays + before.eager)
      << "the launched engine used graphs";
  const std::vector<float> graphed = run(true);
  const CudaGraphStats after = cuda_graph_stats();
  ASSERT_EQ(graphed.size(), launched.size());
  int64_t differ = 0;
  for (size_t i = 0; i < graphed.size(); ++i)
    differ += std::memcmp(&graphed[i], &launched[i], 4) != 0;
  std::printf(
      "    graphs: %lld captured, %lld replayed, %lld stale, %lld eager; %lld of %zu logits "
      "differ\n",
      (long long)(after.captures - mid.captures), (long long)(after.replays - mid.replays),
      (long long)(after.stale - mid.stale), (long long)(after.eager - mid.eager), (long long)differ,
      graphed.size());
  EXPECT_EQ(differ, 0);
  EXPECT_GT(after.replays - mid.replays, 20) << "decode steps did not replay their graphs";
}

std::string name_of(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param.substr(info.param.find_last_of('/') + 1);
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaStep, ::testing::ValuesIn(test::golden_case_dirs()), name_of);

}  // namespace
}  // namespace k3
