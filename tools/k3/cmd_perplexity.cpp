// k3 perplexity: perplexity of a text file with the HF-style sliding window (k3/perplexity.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/error.h"
#include "k3/k3.h"
#include "k3/perplexity.h"
#include "k3/tokenizer.h"
#include "model_dir.h"
#include "resources.h"
#include "run_prompt.h"
#include "tokenizer_io.h"

namespace k3::cli {
namespace {

// What shows on stderr while the windows run. On a terminal: one line per finished window,
// "[3/5] 11.9800 +/- 0.4100  (window 12.6100)", above a progress bar
// "[#####     ]  45.0%  2304/5120 tokens  812.3 tok/s" (ten redraws a second at most).
// Otherwise llama-perplexity's running values, "[1]12.3456,[2]11.9800,", a newline at the end.
class Reporter {
 public:
  explicit Reporter(bool tty) : tty_(tty) {}

  void progress(int64_t done, int64_t total) {
    done_ = done;
    total_ = total;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    draw_bar();
  }

  void window(const PerplexityWindowResult& w, int64_t index, int64_t n_windows) {
    const bool last = index + 1 == n_windows;
    if (tty_) {
      std::fprintf(stderr, "\r\033[K[%lld/%lld] %.4f +/- %.4f  (window %.4f)\n",
                   static_cast<long long>(index + 1), static_cast<long long>(n_windows),
                   w.running_perplexity, w.running_stderr, w.perplexity());
      draw_bar();
      if (last) std::fputc('\n', stderr);
    } else {
      std::fprintf(stderr, "[%lld]%.4f,%s", static_cast<long long>(index + 1), w.running_perplexity,
                   last ? "\n" : "");
    }
    std::fflush(stderr);
  }

 private:
  void draw_bar() {
    if (!tty_) return;
    const double secs = std::chrono::duration<double>(last_ - start_).count();
    const int width = 30;
    const int fill = total_ ? static_cast<int>(width * done_ / total_) : width;
    std::fprintf(stderr, "\r\033[K[%.*s%*s] %5.1f%%  %lld/%lld tokens  %.1f tok/s", fill,
                 "##############################", width - fill, "",
                 total_ ? 100.0 * done_ / total_ : 100.0, static_cast<long long>(done_),
                 static_cast<long long>(total_), secs > 0 ? done_ / secs : 0.0);
    std::fflush(stderr);
  }

  bool tty_;
  int64_t done_ = 0, total_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

nlohmann::json to_json(const PerplexityResult& r, const PerplexityParams& p, int64_t n_tokens,
                       int64_t n_bytes) {
  nlohmann::json windows = nlohmann::json::array();
  for (const PerplexityWindowResult& w : r.windows) {
    windows.push_back({{"begin", w.window.begin},
                       {"end", w.window.end},
                       {"first_scored", w.window.first_scored},
                       {"n_scored", w.n_scored},
                       {"nll_sum", w.nll_sum},
                       {"perplexity", w.perplexity()},
                       {"running_perplexity", w.running_perplexity},
                       {"running_stderr", w.running_stderr}});
  }
  return {{"perplexity", r.perplexity()},
          {"perplexity_stderr", r.perplexity_stderr()},
          {"nll", r.mean_nll()},
          {"nll_stderr", r.nll_stderr()},
          {"nll_sum", r.nll_sum},
          {"bits_per_byte", r.bits_per_byte(n_bytes)},
          {"n_bytes", n_bytes},
          {"n_scored", r.n_scored},
          {"n_tokens", n_tokens},
          {"n_windows", r.n_windows},
          {"n_evaluated", r.n_evaluated},
          {"ctx", p.ctx},
          {"stride", p.stride ? p.stride : p.ctx},
          {"seconds", r.seconds},
          {"tokens_per_second", r.tokens_per_second()},
          {"windows", windows}};
}

}  // namespace

int cmd_perplexity(int argc, char** argv) {
  Args args("perplexity", "[-m DIR] [-f FILE | < stdin] [-c N] [--stride S] [--json]",
            "Perplexity of a text under the model, with a sliding window: windows of --ctx tokens\n"
            "start every --stride tokens, each runs from an empty state and scores only the\n"
            "tokens the previous window did not score (the first token of the text is never\n"
            "scored, nor, when stride = ctx, the first of each window). Prints the perplexity\n"
            "and mean negative log-likelihood (nats) with their standard errors, bits per byte\n"
            "of the scored tokens and tokens/s; the running perplexity after each window on\n"
            "stderr. See docs/CLI.md.",
            {model_option(),
             file_option("the text (default: standard input)"),
             ctx_option("window length in tokens", "512", 2),
             Option("stride", "", "S", "window start step, 1..ctx (default: ctx, no overlap)", "")
                 .range(1),
             threads_option(),
             device_option(),
             precision_option(),
             {"json", "", "", "print one JSON object with all the numbers instead", ""}});
  if (!args.parse(argc, argv)) return 0;
  check(args.has("file") || !isatty(STDIN_FILENO),
        "k3 perplexity needs a text: give -f FILE, or pipe or redirect it into standard input "
        "(k3 perplexity -m DIR < text.txt)");
  apply_threads(args);
  apply_device(args);
  apply_precision(args);
  const std::string dir = resolve_model_dir(args);
  const Tokenizer tok = Tokenizer::load(dir);
  const PromptText text = args.has("file")
                              ? PromptText{read_input_file(args.str("file")), args.str("file")}
                              : PromptText{read_stdin(), "standard input"};
  const std::vector<int32_t> ids = encode_prompt(tok, text);
  const PerplexityParams p{.ctx = args.integer("ctx-size"),
                           .stride = args.has("stride") ? args.integer("stride") : 0};
  perplexity_windows(static_cast<int64_t>(ids.size()), p);  // reject bad settings before loading
  warn_if_model_exceeds_memory(dir);
  auto model = Model::load(dir);
  const int64_t n_tokens = static_cast<int64_t>(ids.size());
  const int64_t n_bytes = perplexity_scored_bytes(tok, ids, p);
  Reporter reporter(isatty(STDERR_FILENO) != 0);
  const PerplexityResult r = perplexity(
      *model, ids, p, [&reporter](int64_t d, int64_t t) { reporter.progress(d, t); },
      [&reporter](const PerplexityWindowResult& w, int64_t i, int64_t n) {
        reporter.window(w, i, n);
      });
  if (args.has("json")) {
    std::printf("%s\n", to_json(r, p, n_tokens, n_bytes).dump(2).c_str());
  } else {
    std::printf("perplexity %.6f +/- %.6f  nll %.6f +/- %.6f  bits/byte %.6f\n", r.perplexity(),
                r.perplexity_stderr(), r.mean_nll(), r.nll_stderr(), r.bits_per_byte(n_bytes));
    std::printf("scored %lld of %s (%s) in %s (ctx %lld, stride %lld)\n",
                static_cast<long long>(r.n_scored), plural(n_tokens, "token").c_str(),
                plural(n_bytes, "byte").c_str(), plural(r.n_windows, "window").c_str(),
                static_cast<long long>(p.ctx), static_cast<long long>(p.stride ? p.stride : p.ctx));
  }
  std::fprintf(stderr, "k3 perplexity: %s run in %.3f s (%.1f tok/s)\n",
               plural(r.n_evaluated, "token").c_str(), r.seconds, r.tokens_per_second());
  return 0;
}

}  // namespace k3::cli
