// Perplexity of a token sequence with a sliding window (the Hugging Face "perplexity of
// fixed-length models" scheme), documented in docs/CLI.md (k3 perplexity).
//
//   std::vector<int32_t> ids = tokenizer.encode(text);
//   k3::PerplexityResult r = k3::perplexity(*model, ids, {.ctx = 512, .stride = 256});
//   std::printf("ppl %.3f over %lld tokens\n", r.perplexity(), (long long)r.n_scored);
//
// Windows start at 0, stride, 2*stride, ... and hold at most ctx tokens: window w covers
// [begin_w, end_w) with end_w = min(begin_w + ctx, N), and the last window is the first one
// that reaches N. Each window runs from an empty state and scores the tokens i in
// [max(begin_w + 1, end_{w-1}), end_w), i.e. those the previous window did not score, each by
// -log p(x_i | x_begin_w .. x_{i-1}). The first token of a window has no context there, so with
// stride == ctx (no overlap) the first token of every window is never scored; with stride < ctx
// every token after the first is scored once, with at least ctx - stride tokens of context
// (fewer only in the first window). perplexity = exp(sum of the scores / number scored).
//
// Uncertainty (as llama-perplexity): the standard error of the mean score,
// sqrt(sum (s_i - mean)^2 / (n - 1) / n) over the n scored tokens, and for the perplexity
// perplexity * that (first-order propagation through exp). Bits per byte: sum of the scores
// / ln 2 / the number of bytes of the scored tokens (perplexity_scored_bytes).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "k3/model.h"
#include "k3/tokenizer.h"

namespace k3 {

struct PerplexityParams {
  int64_t ctx = 512;    // window length in tokens
  int64_t stride = 0;   // window start step, 1..ctx; 0 = ctx (no overlap)
  int64_t chunk = 128;  // prefill piece inside a window (bounds logits memory)
};

struct PerplexityWindow {
  int64_t begin = 0, end = 0;  // tokens [begin, end) are run
  int64_t first_scored = 0;    // tokens [first_scored, end) are scored
};

// One finished window: its own scores, and the running totals over windows 0..this one.
struct PerplexityWindowResult {
  PerplexityWindow window;
  double nll_sum = 0;  // sum of the scores of this window's scored tokens
  int64_t n_scored = 0;
  double perplexity() const;      // exp(nll_sum / n_scored) of this window alone (0 if none scored)
  double running_perplexity = 0;  // perplexity over all tokens scored so far
  double running_stderr = 0;      // its standard error so far
};

struct PerplexityResult {
  double nll_sum = 0;  // sum of -log p over the scored tokens (natural log)
  double nll_m2 = 0;   // sum of squared deviations of the scores from their mean (Welford)
  int64_t n_scored = 0;
  int64_t n_windows = 0;
  int64_t n_evaluated = 0;  // tokens run through the model (sum of window lengths)
  double seconds = 0;
  std::vector<PerplexityWindowResult> windows;  // in order; their n_scored / nll_sum add up
  double perplexity() const;
  double mean_nll() const { return n_scored > 0 ? nll_sum / static_cast<double>(n_scored) : 0; }
  // Standard error of mean_nll(): sqrt(nll_m2 / (n - 1) / n); 0 with fewer than 2 scores.
  double nll_stderr() const;
  // perplexity() * nll_stderr(), the error of exp(mean) to first order (llama-perplexity's).
  double perplexity_stderr() const { return perplexity() * nll_stderr(); }
  // nll_sum in bits per byte of scored text: nll_sum / ln 2 / n_bytes (0 when n_bytes is 0).
  double bits_per_byte(int64_t n_bytes) const;
  double tokens_per_second() const { return seconds > 0 ? n_evaluated / seconds : 0; }
};

// The windows for n_tokens; throws k3::Error when n_tokens < 2 or ctx/stride are out of range.
std::vector<PerplexityWindow> perplexity_windows(int64_t n_tokens, const PerplexityParams& p);

// -log softmax(logits)[target], computed in double.
double token_nll(std::span<const float> logits, int64_t target);

// The bytes the scored tokens stand for: the sum over the scored positions i (those of
// perplexity_windows) of tokenizer.token_to_piece(ids[i]).size(), i.e. the raw bytes of the
// scored tokens before any UTF-8 repair (a special token counts its text). Unscored tokens
// (x_0, and with stride == ctx the first of each window) and their bytes are left out.
int64_t perplexity_scored_bytes(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                                const PerplexityParams& p);

// progress(done, total) counts tokens run, after each prefill piece.
using PerplexityProgress = std::function<void(int64_t done, int64_t total)>;
// window_done(w, index, n_windows) after each window, w holding its scores and running totals.
using PerplexityWindowDone =
    std::function<void(const PerplexityWindowResult& w, int64_t index, int64_t n_windows)>;
PerplexityResult perplexity(const Model& model, std::span<const int32_t> ids,
                            const PerplexityParams& p, const PerplexityProgress& progress = {},
                            const PerplexityWindowDone& window_done = {});

}  // namespace k3
