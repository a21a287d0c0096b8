// Perplexity windowing, and the whole computation against a direct one from `k3 logits`
// output (one NPY of logits per window, log-softmax in double here).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "k3/npy.h"
#include "k3/perplexity.h"
#include "sample/util.h"

namespace k3 {
namespace {

using test::tiny_model;
using test::tiny_tokenizer;

const std::string kText =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity.";

TEST(PerplexityWindows, NoOverlapSkipsEachWindowsFirstToken) {
  const auto w = perplexity_windows(10, {.ctx = 4});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[0].end, 4);
  EXPECT_EQ(w[0].first_scored, 1);
  EXPECT_EQ(w[1].begin, 4);
  EXPECT_EQ(w[1].end, 8);
  EXPECT_EQ(w[1].first_scored, 5);
  EXPECT_EQ(w[2].begin, 8);
  EXPECT_EQ(w[2].end, 10);
  EXPECT_EQ(w[2].first_scored, 9);
}

TEST(PerplexityWindows, OverlapScoresEveryTokenAfterTheFirstOnce) {
  for (int64_t n : {2, 3, 10, 37}) {
    for (int64_t ctx : {2, 4, 7}) {
      for (int64_t stride = 1; stride < ctx; ++stride) {
        int64_t scored = 0, expect_next = 1;
        for (const PerplexityWindow& w : perplexity_windows(n, {.ctx = ctx, .stride = stride})) {
          EXPECT_EQ(w.first_scored, expect_next);
          EXPECT_LE(w.end - w.begin, ctx);
          scored += w.end - w.first_scored;
          expect_next = w.end;
        }
        EXPECT_EQ(scored, n - 1) << n << " " << ctx << " " << stride;
      }
    }
  }
}

TEST(PerplexityWindows, BadSettingsAreErrors) {
  EXPECT_THROW(perplexity_windows(1, {.ctx = 4}), Error);
  EXPECT_THROW(perplexity_windows(10, {.ctx = 4, .stride = 5}), Error);
  EXPECT_THROW(perplexity_windows(10, {.ctx = 1}), Error);
  EXPECT_THROW(perplexity_windows(10, {.ctx = 4, .stride = -1}), Error);
}

TEST(Perplexity, TokenNllIsMinusLogSoftmax) {
  const std::vector<float> l = {1.0f, 2.0f, 3.0f};
  const double z = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(token_nll(l, 0), z - 1.0, 1e-12);
  EXPECT_NEAR(token_nll(l, 2), z - 3.0, 1e-12);
  EXPECT_THROW(token_nll(l, 3), Error);
}

// sum of -log p over the scored tokens, from `k3 logits` run once per window; each score is
// appended to *scores when given.
double reference_nll(const std::vector<int32_t>& ids, const PerplexityParams& p, int64_t* n,
                     std::vector<double>* scores = nullptr) {
  test::TempDir dir;
  double nll = 0;
  *n = 0;
  for (const PerplexityWindow& w : perplexity_windows(static_cast<int64_t>(ids.size()), p)) {
    std::string list;
    for (int64_t i = w.begin; i < w.end; ++i)
      list += (list.empty() ? "" : ",") + std::to_string(ids[i]);
    test::CliResult r = test::run_k3(
        {"logits", "-m", test::tiny_model_dir(), "--ids", list, "-o", dir.file("w.npy")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    NpyArray a = npy_read_f32(dir.file("w.npy"));
    const int64_t V = a.shape[1];
    for (int64_t i = w.first_scored; i < w.end; ++i) {
      const float* row = a.data.data() + (i - 1 - w.begin) * V;
      double mx = -INFINITY, sum = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
      const double score = mx + std::log(sum) - row[ids[i]];
      nll += score;
      if (scores) scores->push_back(score);
      ++*n;
    }
  }
  return nll;
}

TEST(Perplexity, MatchesADirectComputationFromKLogits) {
  const std::vector<int32_t> ids = tiny_tokenizer().encode(kText);
  ASSERT_GT(ids.size(), 30u);
  for (PerplexityParams p :
       {PerplexityParams{.ctx = 16}, PerplexityParams{.ctx = 16, .stride = 5}}) {
    int64_t n = 0;
    const double nll = reference_nll(ids, p, &n);
    const PerplexityResult r = perplexity(tiny_model(), ids, p);
    EXPECT_EQ(r.n_scored, n);
    EXPECT_NEAR(r.nll_sum, nll, 1e-9 * std::abs(nll));
    EXPECT_NEAR(r.perplexity(), std::exp(nll / n), 1e-9 * std::exp(nll / n));
    // Prefill in pieces inside a window: the same scores up to rounding.
    PerplexityParams chunked = p;
    chunked.chunk = 3;
    EXPECT_NEAR(perplexity(tiny_model(), ids, chunked).nll_sum, nll, 1e-4 * std::abs(nll));
  }
}

TEST(Perplexity, StandardErrorMatchesADirectComputationFromTokenScores) {
  const std::vector<int32_t> ids = tiny_tokenizer().encode(kText);
  for (PerplexityParams p :
       {PerplexityParams{.ctx = 16}, PerplexityParams{.ctx = 16, .stride = 5}}) {
    int64_t n = 0;
    std::vector<double> scores;
    reference_nll(ids, p, &n, &scores);
    ASSERT_EQ(static_cast<int64_t>(scores.size()), n);
    double mean = 0;
    for (double s : scores) mean += s;
    mean /= static_cast<double>(n);
    double var = 0;  // unbiased sample variance
    for (double s : scores) var += (s - mean) * (s - mean);
    var /= static_cast<double>(n - 1);
    const double se = std::sqrt(var / static_cast<double>(n));
    const PerplexityResult r = perplexity(tiny_model(), ids, p);
    EXPECT_GT(se, 0);
    EXPECT_NEAR(r.mean_nll(), mean, 1e-9 * mean);
    EXPECT_NEAR(r.nll_stderr(), se, 1e-6 * se);
    EXPECT_NEAR(r.perplexity_stderr(), std::exp(mean) * se, 1e-6 * std::exp(mean) * se);
  }
  PerplexityResult one;  // fewer than two scores: no spread to measure
  one.nll_sum = 2;
  one.n_scored = 1;
  EXPECT_EQ(one.nll_stderr(), 0);
}

TEST(Perplexity, BitsPerByteMatchesADirectComputation) {
  const Tokenizer& tok = tiny_tokenizer();
  const std::vector<int32_t> ids = tok.encode(kText);
  // With overlap every token but x_0 is scored: the scored bytes are the text after x_0's.
  const PerplexityParams overlap{.ctx = 16, .stride = 5};
  const int64_t bytes = static_cast<int64_t>(kText.size() - tok.decode({ids.data(), 1}).size());
  EXPECT_EQ(perplexity_scored_bytes(tok, ids, overlap), bytes);
  const PerplexityResult r = perplexity(tiny_model(), ids, overlap);
  EXPECT_NEAR(r.bits_per_byte(bytes), r.nll_sum / std::log(2.0) / bytes, 1e-12);
  // Without overlap the first token of each window is left out, and its bytes with it.
  const PerplexityParams plain{.ctx = 16};
  int64_t expect = 0;
  for (const PerplexityWindow& w : perplexity_windows(static_cast<int64_t>(ids.size()), plain))
    expect +=
        static_cast<int64_t>(tok.decode({ids.data() + w.first_scored, ids.data() + w.end}).size());
  EXPECT_EQ(perplexity_scored_bytes(tok, ids, plain), expect);
  EXPECT_LT(expect, static_cast<int64_t>(kText.size()));
  EXPECT_EQ(r.bits_per_byte(0), 0);
}

TEST(Perplexity, WindowsAddUpToTheTotal) {
  const std::vector<int32_t> ids = tiny_tokenizer().encode(kText);
  for (PerplexityParams p :
       {PerplexityParams{.ctx = 16}, PerplexityParams{.ctx = 16, .stride = 5}}) {
    std::vector<int64_t> seen;
    const PerplexityResult r = perplexity(
        tiny_model(), ids, p, {},
        [&](const PerplexityWindowResult& w, int64_t i, int64_t n_windows) {
          EXPECT_EQ(n_windows, static_cast<int64_t>(
                                   perplexity_windows(static_cast<int64_t>(ids.size()), p).size()));
          EXPECT_GT(w.running_perplexity, 0);
          seen.push_back(i);
        });
    ASSERT_EQ(static_cast<int64_t>(r.windows.size()), r.n_windows);
    ASSERT_EQ(static_cast<int64_t>(seen.size()), r.n_windows);
    double nll = 0, log_ppl_weighted = 0;
    int64_t n = 0;
    for (size_t i = 0; i < r.windows.size(); ++i) {
      const PerplexityWindowResult& w = r.windows[i];
      EXPECT_EQ(seen[i], static_cast<int64_t>(i));
      EXPECT_EQ(w.n_scored, w.window.end - w.window.first_scored);
      nll += w.nll_sum;
      n += w.n_scored;
      if (w.n_scored > 0) log_ppl_weighted += w.n_scored * std::log(w.perplexity());
      EXPECT_NEAR(w.running_perplexity, std::exp(nll / n), 1e-9 * w.running_perplexity);
    }
    EXPECT_EQ(n, r.n_scored);
    EXPECT_NEAR(nll, r.nll_sum, 1e-9 * r.nll_sum);
    // The total perplexity is the token-weighted geometric mean of the windows'.
    EXPECT_NEAR(std::exp(log_ppl_weighted / n), r.perplexity(), 1e-9 * r.perplexity());
    EXPECT_DOUBLE_EQ(r.windows.back().running_perplexity, r.perplexity());
    EXPECT_DOUBLE_EQ(r.windows.back().running_stderr, r.perplexity_stderr());
  }
}

TEST(Perplexity, CliPrintsTheSameNumber) {
  test::TempDir dir;
  const std::string file = dir.write("text.txt", kText);
  test::CliResult r = test::run_k3(
      {"perplexity", "-m", test::tiny_model_dir(), "-f", file, "--ctx", "16", "--stride", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<int32_t> ids = tiny_tokenizer().encode(kText);
  const PerplexityResult ref = perplexity(tiny_model(), ids, {.ctx = 16, .stride = 8});
  ASSERT_EQ(r.out.rfind("perplexity ", 0), 0u) << r.out;
  const double printed = std::stod(r.out.substr(11));
  EXPECT_NEAR(printed, ref.perplexity(), 1e-6 * ref.perplexity() + 1e-6);
  EXPECT_NE(r.out.find("scored " + std::to_string(ids.size() - 1) + " of " +
                       std::to_string(ids.size()) + " tokens"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3
