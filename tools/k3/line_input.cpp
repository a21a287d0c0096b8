#include "line_input.h"

#ifdef K3_HAVE_LIBEDIT
#include <editline/readline.h>  // libedit, readline-compatible API
#endif
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "k3/error.h"

namespace k3::cli {
namespace {

volatile sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }

#ifdef K3_HAVE_LIBEDIT
constexpr bool kHaveLibedit = true;
constexpr int kHistoryLines = 1000;

// The state of the libedit line being read (its callback interface has no user pointer).
std::string* g_edit_line = nullptr;
bool g_edit_done = false;
bool g_edit_eof = false;

void on_edited_line(char* text) {
  g_edit_done = true;
  g_edit_eof = text == nullptr;
  if (text != nullptr) {
    *g_edit_line = text;
    std::free(text);
  }
}

// $K3_CHAT_HISTORY (empty: no history file), else $XDG_STATE_HOME/k3/chat_history with
// XDG_STATE_HOME defaulting to ~/.local/state; empty when there is no home either.
std::string history_path() {
  if (const char* p = std::getenv("K3_CHAT_HISTORY")) return p;
  std::filesystem::path base;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/') {
    base = x;
  } else if (const char* h = std::getenv("HOME"); h != nullptr && h[0] != '\0') {
    base = std::filesystem::path(h) / ".local" / "state";
  } else {
    return "";
  }
  std::error_code ec;
  std::filesystem::create_directories(base / "k3", ec);
  return ec ? "" : (base / "k3" / "chat_history").string();
}
#else
constexpr bool kHaveLibedit = false;  // built without libedit: plain line input only
#endif

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

bool interrupted() { return g_interrupted != 0; }
void clear_interrupted() { g_interrupted = 0; }

LineReader::LineReader(int fd)
    : fd_(fd),
      editing_(kHaveLibedit && fd == STDIN_FILENO && isatty(STDIN_FILENO) &&
               isatty(STDOUT_FILENO)) {
#ifdef K3_HAVE_LIBEDIT
  if (!editing_) return;
  rl_catch_signals = 0;  // SIGINT stays with install_interrupt_handler()
  rl_readline_name = const_cast<char*>("k3");
  rl_initialize();
  stifle_history(kHistoryLines);
  history_file_ = history_path();
  if (!history_file_.empty()) read_history(history_file_.c_str());
#endif
}

LineReader::~LineReader() {
#ifdef K3_HAVE_LIBEDIT
  if (editing_) rl_callback_handler_remove();
#endif
}

#ifndef K3_HAVE_LIBEDIT
ReadStatus LineReader::read_edited(std::string& line, const char* prompt) {
  return read_physical(line);  // never reached: editing_ is false without libedit
}
#else
ReadStatus LineReader::read_edited(std::string& line, const char* prompt) {
  g_edit_line = &line;
  g_edit_done = false;
  g_edit_eof = false;
  rl_callback_handler_install(prompt, on_edited_line);
  // SIGINT is blocked except inside ppoll, so a Ctrl-C is seen either by the check or as EINTR.
  sigset_t block, orig;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  bool hangup = false;
  while (!g_edit_done && !hangup && !interrupted()) {
    sigprocmask(SIG_BLOCK, &block, &orig);
    if (interrupted()) {
      sigprocmask(SIG_SETMASK, &orig, nullptr);
      break;
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = ppoll(&p, 1, nullptr, &orig);
    const int err = errno;
    sigprocmask(SIG_SETMASK, &orig, nullptr);
    if (r < 0) {
      check(err == EINTR, "cannot read standard input: ", std::strerror(err));
      continue;
    }
    hangup = (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
    if (!hangup) rl_callback_read_char();
  }
  rl_callback_handler_remove();  // back to the normal terminal mode
  const bool cut = !g_edit_done;
  g_edit_line = nullptr;
  if (cut && !hangup) {  // Ctrl-C: drop what was typed, the caller prints a fresh prompt
    std::fputs("\n", stdout);
    std::fflush(stdout);
    return ReadStatus::interrupted;
  }
  if (cut || g_edit_eof) {  // Ctrl-D: leave on a fresh line
    std::fputs("\n", stdout);
    std::fflush(stdout);
    return ReadStatus::eof;
  }
  if (line.find_first_not_of(" \t") != std::string::npos) {
    add_history(line.c_str());
    if (!history_file_.empty() && write_history(history_file_.c_str()) == 0) {
      chmod(history_file_.c_str(), 0600);  // what was typed stays private
    }
  }
  return ReadStatus::line;
}
#endif

ReadStatus LineReader::read_physical(std::string& line) {
  for (;;) {
    const size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return ReadStatus::line;
    }
    if (eof_) {
      if (buf_.empty()) return ReadStatus::eof;
      line.swap(buf_);
      buf_.clear();
      return ReadStatus::line;
    }
    if (interrupted()) return ReadStatus::interrupted;  // Ctrl-C just before the read
    char chunk[4096];
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) {
      if (interrupted()) return ReadStatus::interrupted;
      continue;
    }
    check(n >= 0, "cannot read standard input: ", std::strerror(errno));
    if (n == 0) eof_ = true;
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

ReadStatus LineReader::read(std::string& out, const char* prompt, const char* more) {
  const bool tty = !editing_ && isatty(fd_);
  out.clear();
  for (bool first = true;; first = false) {
    if (tty) {
      std::fputs(first ? prompt : more, stdout);
      std::fflush(stdout);
    }
    std::string line;
    const ReadStatus s = editing_ ? read_edited(line, first ? prompt : more) : read_physical(line);
    if (s != ReadStatus::line) return first || s == ReadStatus::interrupted ? s : ReadStatus::line;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.back() != '\\') {
      out += line;
      return ReadStatus::line;
    }
    line.pop_back();
    out += line + "\n";
  }
}

}  // namespace k3::cli
