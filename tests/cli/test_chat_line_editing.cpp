// `k3 chat` on a terminal (issue "everyday use", point 5): libedit line editing with the up arrow
// recalling earlier lines, history kept across sessions in $K3_CHAT_HISTORY, Ctrl-C at the
// prompt clearing the line (the chat goes on) and Ctrl-D leaving on a fresh line with status 0.
// Driven through a pseudo-terminal; every wait is bounded and the child is killed after 20 s.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/cli_harness.h"
#include "common/tiny_model.h"

namespace k3::test {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// `k3 chat` on the slave side of a pty; the test types on the master side.
class PtyChat {
 public:
  PtyChat(const std::string& model, const std::string& history)
      : deadline_(Clock::now() + std::chrono::seconds(20)) {
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      setenv("TERM", "xterm", 1);
      setenv("K3_CHAT_HISTORY", history.c_str(), 1);
      execl(K3_CLI_PATH, "k3", "chat", "-m", model.c_str(), "-n", "2", "-s", "1", "-t", "1",
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~PtyChat() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  bool started() const { return pid_ > 0; }
  const std::string& out() const { return out_; }

  void type(const std::string& keys) {
    ASSERT_EQ(write(fd_, keys.data(), keys.size()), ssize_t(keys.size()));
  }

  // Reads until `needle` appears at or after `from`; returns its position or npos on timeout/EOF.
  size_t wait_for(const std::string& needle, size_t from) {
    for (;;) {
      const size_t at = out_.find(needle, from);
      if (at != std::string::npos) return at;
      if (!read_some()) return std::string::npos;
    }
  }
  // Reads to the end of output, then reaps the child; returns its wait status or -1 on timeout.
  int finish() {
    while (read_some()) {
    }
    for (;;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return status;
      }
      if (Clock::now() > deadline_) return -1;
      usleep(20000);
    }
  }
  bool running() { return waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  bool read_some() {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) return false;  // EIO once the child has closed the terminal
    out_.append(buf, static_cast<size_t>(n));
    return true;
  }

  Clock::time_point deadline_;
  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  std::string out_;
};

TEST(ChatLineEditing, ArrowsHistoryCtrlCAndCtrlD) {
#ifndef K3_HAVE_LIBEDIT
  GTEST_SKIP() << "k3 was built without libedit (pkg-config libedit not found): no line editing";
#endif
  const TempDir dir;
  const std::string model = make_tiny_chat_model(dir);
  const std::string history = dir.file("chat_history");
  {
    PtyChat chat(model, history);
    ASSERT_TRUE(chat.started());
    size_t at = chat.wait_for("> ", 0);
    ASSERT_NE(at, std::string::npos) << chat.out();
    chat.type("hello there\r");
    at = chat.wait_for("stop:", at);  // the answer's timing line
    ASSERT_NE(at, std::string::npos) << chat.out();
    at = chat.wait_for("> ", at);
    ASSERT_NE(at, std::string::npos) << chat.out();
    chat.type("\x1b[A");  // up arrow: the line just sent comes back
    at = chat.wait_for("hello there", at);
    ASSERT_NE(at, std::string::npos) << chat.out();
    chat.type("\x03");  // Ctrl-C at the prompt: the line is dropped, a fresh prompt follows
    at = chat.wait_for("\n> ", at);
    ASSERT_NE(at, std::string::npos) << chat.out();
    EXPECT_TRUE(chat.running()) << chat.out();
    const size_t answers = chat.out().find("stop:", chat.out().find("stop:") + 1);
    EXPECT_EQ(answers, std::string::npos) << "Ctrl-C sent the line: " << chat.out();
    chat.type("\x04");  // Ctrl-D: leave
    const int status = chat.finish();
    ASSERT_TRUE(WIFEXITED(status)) << status << ": " << chat.out();
    EXPECT_EQ(WEXITSTATUS(status), 0) << chat.out();
    ASSERT_FALSE(chat.out().empty());
    EXPECT_EQ(chat.out().back(), '\n') << chat.out();
  }
  ASSERT_TRUE(fs::exists(history));
  EXPECT_NE(read_file_bytes(history).find("hello"), std::string::npos) << read_file_bytes(history);
  {  // a new session recalls the line from the history file
    PtyChat chat(model, history);
    ASSERT_TRUE(chat.started());
    size_t at = chat.wait_for("> ", 0);
    ASSERT_NE(at, std::string::npos) << chat.out();
    chat.type("\x1b[A");
    at = chat.wait_for("hello there", at);
    ASSERT_NE(at, std::string::npos) << chat.out();
    chat.type("\x03");  // (the terminal drops what is typed ahead of a Ctrl-C)
    ASSERT_NE(chat.wait_for("\n> ", at), std::string::npos) << chat.out();
    chat.type("\x04");
    const int status = chat.finish();
    ASSERT_TRUE(WIFEXITED(status)) << status << ": " << chat.out();
    EXPECT_EQ(WEXITSTATUS(status), 0) << chat.out();
  }
}

}  // namespace
}  // namespace k3::test
