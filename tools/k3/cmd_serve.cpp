// k3 serve: the OpenAI-compatible HTTP server (k3/server.h, docs/SERVER.md) with
// llama-server-style flags. SIGTERM or Ctrl-C stops it gracefully: new requests get 503,
// running ones finish (up to --grace seconds) or are cancelled, then it exits 0.
#if K3_HAVE_SERVER
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/error.h"
#include "k3/model.h"
#include "k3/server.h"
#include "k3/tokenizer.h"
#include "model_dir.h"
#include "resources.h"

namespace k3::cli {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

Args serve_args() {
  return Args(
      "serve", "[-m DIR] [--host ADDR] [--port N] [options]",
      "Serve the model over HTTP with the OpenAI API: POST /v1/chat/completions and\n"
      "/v1/completions (streamed as SSE with \"stream\": true), GET /v1/models, /health,\n"
      "/metrics (Prometheus) and a chat page at /. Requests are batched together into each\n"
      "step (continuous batching); prompts sharing a prefix reuse its saved state.",
      {model_option(),
       {"host", "", "ADDR", "address to listen on", "127.0.0.1"},
       Option("port", "", "N", "port to listen on (0: any free port)", "8080").range(0, 65535),
       ctx_option("context per request: prompt + completion tokens", "4096", 2),
       threads_option(),
       device_option(),
       precision_option(),
       Option("parallel", "np", "N", "requests decoding together", "4").range(1, 4096),
       Option("queue", "", "N", "requests waiting beyond --parallel; more get 429", "64")
           .range(0, 1 << 20),
       Option("batch-tokens", "b", "N", "tokens per step (decodes, then prompt chunks)", "256")
           .range(1, 1 << 20),
       Option("cache-mb", "", "N", "prefix cache budget in MiB (0: off)", "64").range(0, 1 << 20),
       Option("cache-every", "", "N", "prefix cache snapshot interval in tokens (multiple of 16)",
              "64")
           .range(16, 1 << 20),
       {"api-key", "", "KEY", "require Authorization: Bearer KEY on /v1/*", ""},
       {"alias", "a", "NAME", "model id reported by /v1/models", "k3"},
       Option("grace", "", "SECONDS", "on SIGTERM, time running requests get to finish", "10")
           .range(0, 3600)});
}

// K3_SERVE_STEP_DELAY_MS: a test knob (scripts/test-webpage.sh), not a user setting: the
// scheduler pauses this long after each step so that a browser test can press Stop mid-answer.
int test_step_delay_ms() {
  const char* v = std::getenv("K3_SERVE_STEP_DELAY_MS");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long ms = std::strtol(v, &end, 10);
  check(*end == '\0' && ms >= 0 && ms <= 10000,
        "K3_SERVE_STEP_DELAY_MS must be an integer within [0, 10000], got '", v, "'");
  return static_cast<int>(ms);
}

ServerOptions server_options(const Args& a) {
  return {.host = a.str("host"),
          .port = static_cast<int>(a.integer("port")),
          .n_ctx = a.integer("ctx-size"),
          .parallel = a.integer("parallel"),
          .max_queue = a.integer("queue"),
          .step_tokens = a.integer("batch-tokens"),
          .cache_bytes = static_cast<size_t>(a.integer("cache-mb")) << 20,
          .cache_every = a.integer("cache-every"),
          .api_key = a.has("api-key") ? a.str("api-key") : "",
          .model_name = a.str("alias"),
          .test_step_delay_ms = test_step_delay_ms()};
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  Args args = serve_args();
  if (!args.parse(argc, argv)) return 0;
  apply_threads(args);
  apply_device(args);
  apply_precision(args);
  const std::string dir = resolve_model_dir(args);
  const Tokenizer tok = Tokenizer::load(dir);
  warn_if_model_exceeds_memory(dir);
  auto model = Model::load(dir);
  ServerOptions opt = server_options(args);
  check(opt.n_ctx <= model->max_positions(), "-c ", opt.n_ctx,
        " is above the model's max_position_embeddings ", model->max_positions());
  Server server(*model, tok, opt);
  server.bind();
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  std::thread watcher([&] {
    while (g_stop_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::fprintf(stderr, "k3 serve: stopping (signal %d)\n", static_cast<int>(g_stop_signal));
    server.stop(static_cast<double>(args.integer("grace")));
  });
  std::printf("k3 serve: listening on %s (model %s, %lld parallel, context %lld)\n",
              server.url().c_str(), dir.c_str(), static_cast<long long>(opt.parallel),
              static_cast<long long>(opt.n_ctx));
  std::fflush(stdout);
  server.run();
  if (g_stop_signal == 0) g_stop_signal = SIGTERM;  // run() ended on its own: let the watcher go
  watcher.join();
  std::fprintf(stderr, "k3 serve: stopped\n");
  return 0;
}

}  // namespace k3::cli

#else  // built without cpp-httplib

#include <cstdio>

#include "commands.h"

namespace k3::cli {

int cmd_serve(int, char**) {
  std::fprintf(stderr,
               "k3 serve: error: this build has no HTTP server: cpp-httplib was not found when it "
               "was built (install libcpp-httplib-dev, or run scripts/install-deps.sh, and "
               "rebuild)\n");
  return 1;
}

}  // namespace k3::cli

#endif
