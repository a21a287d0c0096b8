// k3 init: write a random-initialised checkpoint in the official layout for any config.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/error.h"
#include "k3/init.h"

namespace k3::cli {
namespace {

// A one-line progress bar on stderr, redrawn at most ten times a second.
class ProgressBar {
 public:
  void operator()(uint64_t done, uint64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const int width = 30;
    const int fill = total ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r[%.*s%*s] %5.1f%%  %.2f / %.2f GB", fill,
                 "##############################", width - fill, "",
                 total ? 100.0 * done / total : 100.0, done / 1e9, total / 1e9);
    if (done >= total) std::fputc('\n', stderr);
  }

 private:
  std::chrono::steady_clock::time_point last_{};
};

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) { g_interrupted = 1; }

// Ctrl-C sets a flag that the writer polls between blocks of rows, so it can remove its
// temporary files before exiting.
void catch_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

}  // namespace

int cmd_init(int argc, char** argv) {
  Args args("init", "--config CONFIG.json -o DIR [--seed N] [--mxfp4]",
            "Write a random-initialised checkpoint in the official K3 layout (config.json,\n"
            "model.safetensors.index.json, model-NNNNN-of-NNNNNN.safetensors) for any config.\n"
            "Weights are generated row by row and streamed to disk, so full-width slices of\n"
            "tens of GB need little memory. The same seed always gives the same bytes.\n"
            "Refuses when the checkpoint is larger than the free disk space or DIR is not\n"
            "empty (--force overrides). Shards are written under temporary names and renamed\n"
            "at the end, so an error or Ctrl-C leaves no partial shard behind.",
            {{"config", "", "FILE",
              "config.json (top-level with text_config, or a bare text config)", ""},
             {"output", "o", "DIR", "output directory (created)", ""},
             seed_option("0"),
             {"mxfp4", "", "", "store routed experts as MXFP4 (compressed-tensors)", ""},
             {"shard-gb", "", "GB", "maximum shard size", "4"},
             {"force", "", "",
              "write even when the disk looks too small or the directory is not empty", ""}});
  if (!args.parse(argc, argv)) return 0;
  InitOptions opt;
  opt.seed = static_cast<uint64_t>(args.integer("seed"));
  opt.mxfp4 = args.has("mxfp4");
  const double gb = args.number("shard-gb");
  check(gb > 0, "--shard-gb must be positive");
  opt.shard_bytes = static_cast<uint64_t>(gb * 1e9);
  ProgressBar bar;
  if (isatty(STDERR_FILENO)) opt.progress = [&bar](uint64_t d, uint64_t t) { bar(d, t); };
  opt.force = args.has("force");
  if (const char* env = std::getenv("K3_INIT_FREE_BYTES")) {  // tests: simulate a full disk
    opt.free_bytes = std::strtoull(env, nullptr, 10);
  }
  catch_sigint();
  opt.cancelled = [] { return g_interrupted != 0; };
  const std::string out = args.str("output");
  try {
    init_checkpoint_from_file(args.str("config"), out, opt);
  } catch (const Error&) {
    if (!g_interrupted) throw;
    std::fprintf(stderr, "\nk3 init: interrupted; removed the partial files\n");
    return 130;
  }
  std::fprintf(stderr, "k3 init: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace k3::cli
