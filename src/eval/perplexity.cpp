#include "k3/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace k3 {

double PerplexityResult::perplexity() const {
  return n_scored > 0 ? std::exp(nll_sum / static_cast<double>(n_scored)) : 0.0;
}

double PerplexityResult::nll_stderr() const {
  if (n_scored < 2) return 0.0;
  const auto n = static_cast<double>(n_scored);
  return std::sqrt(std::max(nll_m2, 0.0) / (n - 1) / n);
}

double PerplexityResult::bits_per_byte(int64_t n_bytes) const {
  return n_bytes > 0 ? nll_sum / std::log(2.0) / static_cast<double>(n_bytes) : 0.0;
}

double PerplexityWindowResult::perplexity() const {
  return n_scored > 0 ? std::exp(nll_sum / static_cast<double>(n_scored)) : 0.0;
}

std::vector<PerplexityWindow> perplexity_windows(int64_t n_tokens, const PerplexityParams& p) {
  const int64_t stride = p.stride == 0 ? p.ctx : p.stride;
  check(p.ctx >= 2, "perplexity: the window (ctx) must be at least 2 tokens, found ", p.ctx);
  check(stride >= 1 && stride <= p.ctx, "perplexity: the stride must be in [1, ctx = ", p.ctx,
        "], found ", stride);
  check(n_tokens >= 2, "perplexity: the text has ", n_tokens,
        " token(s); at least 2 are needed to score one");
  std::vector<PerplexityWindow> windows;
  int64_t prev_end = 0;
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + p.ctx, n_tokens);
    windows.push_back({.begin = begin, .end = end, .first_scored = std::max(begin + 1, prev_end)});
    prev_end = end;
    if (end == n_tokens) break;
  }
  return windows;
}

int64_t perplexity_scored_bytes(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                                const PerplexityParams& p) {
  int64_t bytes = 0;
  for (const PerplexityWindow& w : perplexity_windows(static_cast<int64_t>(ids.size()), p)) {
    for (int64_t i = w.first_scored; i < w.end; ++i)
      bytes += static_cast<int64_t>(tokenizer.token_to_piece(ids[static_cast<size_t>(i)]).size());
  }
  return bytes;
}

double token_nll(std::span<const float> logits, int64_t target) {
  check(target >= 0 && target < static_cast<int64_t>(logits.size()), "perplexity: token id ",
        target, " is outside the vocabulary [0, ", logits.size(), ")");
  double mx = -INFINITY;
  for (float x : logits) mx = std::max(mx, static_cast<double>(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  return mx + std::log(sum) - static_cast<double>(logits[static_cast<size_t>(target)]);
}

namespace {

// Runs one window in prefill pieces and adds the scores of its scored tokens to r.
struct WindowRun {
  Sequence& seq;
  size_t vocab;
  const PerplexityParams& p;
  const PerplexityProgress& progress;
  int64_t total;  // tokens to run over all windows
};

// Adds one score to r (sum, count, and Welford's running mean / squared deviations) and to w.
void add_score(double nll, double& mean, PerplexityResult& r, PerplexityWindowResult& w) {
  r.nll_sum += nll;
  ++r.n_scored;
  const double delta = nll - mean;
  mean += delta / static_cast<double>(r.n_scored);
  r.nll_m2 += delta * (nll - mean);
  w.nll_sum += nll;
  ++w.n_scored;
}

void score_window(const WindowRun& run, std::span<const int32_t> ids, const PerplexityWindow& w,
                  double& mean, PerplexityResult& r, PerplexityWindowResult& wr) {
  const size_t V = run.vocab;
  const int64_t chunk = run.p.chunk;
  Sequence& seq = run.seq;
  seq.reset();
  for (int64_t at = w.begin; at < w.end; at += chunk) {
    const int64_t stop = std::min(at + chunk, w.end);
    std::vector<float> logits =
        seq.prefill(std::vector<int64_t>(ids.begin() + at, ids.begin() + stop));
    // Row j holds the prediction for token at + j + 1.
    for (int64_t i = std::max(at + 1, w.first_scored); i <= std::min(stop, w.end - 1); ++i) {
      const size_t row = static_cast<size_t>(i - 1 - at);
      add_score(token_nll(std::span(logits).subspan(row * V, V), ids[static_cast<size_t>(i)]), mean,
                r, wr);
    }
    r.n_evaluated += stop - at;
    if (run.progress) run.progress(r.n_evaluated, run.total);
  }
}

}  // namespace

PerplexityResult perplexity(const Model& model, std::span<const int32_t> ids,
                            const PerplexityParams& p, const PerplexityProgress& progress,
                            const PerplexityWindowDone& window_done) {
  check(p.chunk >= 1, "perplexity: chunk must be >= 1");
  const std::vector<PerplexityWindow> windows =
      perplexity_windows(static_cast<int64_t>(ids.size()), p);
  for (size_t i = 0; i < ids.size(); ++i) {
    check(ids[i] >= 0 && ids[i] < model.vocab_size(), "perplexity: token id ", ids[i],
          " (position ", i, ") is outside the model's vocabulary [0, ", model.vocab_size(), ")");
  }
  int64_t total = 0;
  for (const PerplexityWindow& w : windows) total += w.end - w.begin;
  PerplexityResult r;
  r.n_windows = static_cast<int64_t>(windows.size());
  Sequence seq(model);
  const auto t0 = std::chrono::steady_clock::now();
  const WindowRun run{.seq = seq,
                      .vocab = static_cast<size_t>(model.vocab_size()),
                      .p = p,
                      .progress = progress,
                      .total = total};
  double mean = 0;
  r.windows.reserve(windows.size());
  for (const PerplexityWindow& w : windows) {
    PerplexityWindowResult wr{.window = w};
    score_window(run, ids, w, mean, r, wr);
    wr.running_perplexity = r.perplexity();
    wr.running_stderr = r.perplexity_stderr();
    r.windows.push_back(wr);
    if (window_done)
      window_done(r.windows.back(), static_cast<int64_t>(r.windows.size()) - 1, r.n_windows);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace k3
