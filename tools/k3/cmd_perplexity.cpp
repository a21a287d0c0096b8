// k3 perplexity: perplexity of a text file with the HF-style sliding window (k3/perplexity.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/error.h"
#include "k3/k3.h"
#include "k3/perplexity.h"
#include "k3/tokenizer.h"
#include "model_dir.h"
#include "run_prompt.h"
#include "tokenizer_io.h"

namespace k3::cli {
namespace {

// "[#####     ]  45.0%  2304/5120 tokens  812.3 tok/s" on stderr, ten redraws a second at most.
class Progress {
 public:
  void operator()(int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const int width = 30;
    const int fill = total ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r[%.*s%*s] %5.1f%%  %lld/%lld tokens  %.1f tok/s", fill,
                 "##############################", width - fill, "",
                 total ? 100.0 * done / total : 100.0, static_cast<long long>(done),
                 static_cast<long long>(total), secs > 0 ? done / secs : 0.0);
    if (done >= total) std::fputc('\n', stderr);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

}  // namespace

int cmd_perplexity(int argc, char** argv) {
  Args args("perplexity", "[-m DIR] [-f FILE | < stdin] [-c N] [--stride S]",
            "Perplexity of a text under the model, with a sliding window: windows of --ctx tokens\n"
            "start every --stride tokens, each runs from an empty state and scores only the\n"
            "tokens the previous window did not score (the first token of the text is never\n"
            "scored, nor, when stride = ctx, the first of each window). Prints the perplexity,\n"
            "the mean negative log-likelihood (nats) and tokens/s. See docs/CLI.md.",
            {model_option(), file_option("the text (default: standard input)"),
             ctx_option("window length in tokens", "512", 2),
             Option("stride", "", "S", "window start step, 1..ctx (default: ctx, no overlap)", "")
                 .range(1),
             threads_option()});
  if (!args.parse(argc, argv)) return 0;
  apply_threads(args);
  const std::string dir = resolve_model_dir(args);
  const Tokenizer tok = Tokenizer::load(dir);
  const PromptText text = args.has("file")
                              ? PromptText{read_input_file(args.str("file")), args.str("file")}
                              : PromptText{read_stdin(), "standard input"};
  const std::vector<int32_t> ids = encode_prompt(tok, text);
  const PerplexityParams p{.ctx = args.integer("ctx-size"),
                           .stride = args.has("stride") ? args.integer("stride") : 0};
  perplexity_windows(static_cast<int64_t>(ids.size()), p);  // reject bad settings before loading
  auto model = Model::load(dir);
  Progress bar;
  PerplexityProgress progress;
  if (isatty(STDERR_FILENO)) progress = [&bar](int64_t d, int64_t t) { bar(d, t); };
  const PerplexityResult r = perplexity(*model, ids, p, progress);
  std::printf("perplexity %.6f  nll %.6f  scored %lld of %s in %s (ctx %lld, stride %lld)\n",
              r.perplexity(), r.nll_sum / static_cast<double>(r.n_scored),
              static_cast<long long>(r.n_scored),
              plural(static_cast<int64_t>(ids.size()), "token").c_str(),
              plural(r.n_windows, "window").c_str(), static_cast<long long>(p.ctx),
              static_cast<long long>(p.stride ? p.stride : p.ctx));
  std::fprintf(stderr, "k3 perplexity: %s run in %.3f s (%.1f tok/s)\n",
               plural(r.n_evaluated, "token").c_str(), r.seconds, r.tokens_per_second());
  return 0;
}

}  // namespace k3::cli
