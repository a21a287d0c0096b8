#include "line_input.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "k3/error.h"

namespace k3::cli {
namespace {

volatile sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }

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
  const bool tty = isatty(fd_);
  out.clear();
  for (bool first = true;; first = false) {
    if (tty) {
      std::fputs(first ? prompt : more, stdout);
      std::fflush(stdout);
    }
    std::string line;
    const ReadStatus s = read_physical(line);
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
