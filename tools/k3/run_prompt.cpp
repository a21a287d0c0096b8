#include "run_prompt.h"

#include <signal.h>

#include <cstdio>

#include "k3/error.h"

namespace k3::cli {

void check_utf8(const PromptText& p) {
  const size_t bad = find_invalid_utf8(p.text);
  if (bad == std::string::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(p.text[bad]));
  fail(p.source, " is not valid UTF-8: ill-formed byte ", byte, " at byte offset ", bad);
}

namespace {

static_assert(std::atomic<bool>::is_always_lock_free, "the flag is set in a signal handler");
std::atomic<bool> g_cancel{false};
struct sigaction g_previous {};

void on_sigint(int sig) {
  g_cancel.store(true, std::memory_order_relaxed);
  if (!(g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_handler != SIG_DFL &&
      g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  }
}

}  // namespace

std::atomic<bool>& cancel_on_sigint() {
  static const bool installed = [] {
    sigaction(SIGINT, nullptr, &g_previous);
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = g_previous.sa_flags & ~SA_SIGINFO;  // keeps SA_RESTART off where it was
    sigaction(SIGINT, &sa, nullptr);
    return true;
  }();
  (void)installed;
  return g_cancel;
}

std::vector<int32_t> encode_prompt(const Tokenizer& tok, const PromptText& p) {
  check_utf8(p);
  return tok.encode(p.text);
}

}  // namespace k3::cli
