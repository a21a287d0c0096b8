// Ctrl-C during a long prefill in k3 run and k3 chat (the built binary): it stops within a
// second; run exits 130, chat drops the unanswered message and goes on.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sample/util.h"

namespace k3 {
namespace {

using test::tiny_model_dir;
using Clock = std::chrono::steady_clock;

// About `n` tokens of plain text (well inside the tiny model's 4096-token context).
std::string long_text(size_t n) {
  const std::string words = "the quick brown fox jumps over the lazy dog and runs away ";
  std::string text;
  while (test::tiny_tokenizer().encode(text + words).size() < n) text += words;
  return text;
}

// Waits up to `limit_s` for the child to exit; returns its exit code, or -1 (killed) on timeout.
int wait_exit_within(pid_t pid, double limit_s, double* took_s) {
  const auto t0 = Clock::now();
  int status = 0;
  for (;;) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    if (std::chrono::duration<double>(Clock::now() - t0).count() > limit_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      *took_s = limit_s;
      return -1;
    }
    usleep(2000);
  }
  *took_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CliCancel, CtrlCDuringALongRunPrefillExits130WithinASecond) {
  test::TempDir dir;
  const std::string prompt = dir.write("long.txt", long_text(3500));
  const std::string out = dir.file("out"), err = dir.file("err");
  test::SpawnedK3 c = test::spawn_k3({"run", "-m", tiny_model_dir(), "-f", prompt, "-c", "4096",
                                      "-n", "500", "--ignore-eos", "-t", "1"},
                                     out, err);
  close(c.in);
  usleep(300000);
  kill(c.pid, SIGINT);
  double took = 0;
  const int code = wait_exit_within(c.pid, 5.0, &took);
  const std::string e = test::read_file(err);
  EXPECT_EQ(code, 130) << e;
  EXPECT_LT(took, 1.0) << e;
  EXPECT_NE(e.find("cancelled"), std::string::npos) << e;
}

bool wait_for_text(const std::string& path, const std::string& text, double limit_s) {
  const auto t0 = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < limit_s) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec) &&
        test::read_file(path).find(text) != std::string::npos) {
      return true;
    }
    usleep(2000);
  }
  return false;
}

TEST(CliCancel, CtrlCDuringAChatPrefillDropsTheMessageAndTheChatGoesOn) {
  test::TempDir dir;
  const std::string out = dir.file("out"), err = dir.file("err"), saved = dir.file("c.json");
  test::SpawnedK3 c = test::spawn_k3(
      {"chat", "-m", tiny_model_dir(), "-c", "4096", "-n", "4", "-t", "1"}, out, err);
  auto send = [&c](const std::string& text) {
    ASSERT_EQ(write(c.in, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  };
  send("Hi\n");  // a first turn: the chat is up, Ctrl-C is handled
  ASSERT_TRUE(wait_for_text(err, "stop: ", 20)) << test::read_file(err);
  send(long_text(3500) + "\n");  // a prefill of about half a second or more
  usleep(100000);
  const auto t0 = Clock::now();
  kill(c.pid, SIGINT);
  ASSERT_TRUE(wait_for_text(err, "the message is dropped]", 5)) << test::read_file(err);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
  // The chat goes on; the conversation holds the first turn only.
  send("/save " + saved + "\n/quit\n");
  close(c.in);
  double took = 0;
  EXPECT_EQ(wait_exit_within(c.pid, 30.0, &took), 0) << test::read_file(err);
  auto conv = nlohmann::json::parse(test::read_file(saved));
  ASSERT_EQ(conv.size(), 2u) << conv.dump();
  EXPECT_EQ(conv[0]["content"], "Hi");
  EXPECT_EQ(conv[1]["role"], "assistant");
}

}  // namespace
}  // namespace k3
