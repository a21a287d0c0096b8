// The `k3 serve` command: the startup line with the URL, serving on it, SIGTERM ends it with
// exit 0; bad flags and a port in use are clear errors.
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "server/server_fixture.h"

namespace k3::test {
namespace {

// Waits (bounded) for the child to exit; its exit code, or -1 when it did not exit in time.
int wait_exit(pid_t pid, int ms) {
  for (int i = 0; i < ms / 20; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

TEST(ServeCli, StartupLineServesAndStopsOnSigterm) {
  TempDir dir;
  SpawnedK3 k = spawn_k3({"serve", "-m", tiny().path, "--port", "0", "-t", "1", "--parallel", "2"},
                         dir.file("out"), dir.file("err"));
  int port = -1;
  const std::regex line(R"(k3 serve: listening on http://127\.0\.0\.1:(\d+)/ )");
  for (int i = 0; i < 1500 && port < 0; ++i) {  // up to 30 s
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::smatch m;
    if (!std::filesystem::exists(dir.file("out"))) continue;  // not opened by the child yet
    const std::string out = read_file_bytes(dir.file("out"));
    if (std::regex_search(out, m, line)) port = std::stoi(m[1]);
  }
  ASSERT_GT(port, 0) << read_file_bytes(dir.file("err"));
  httplib::Client c("127.0.0.1", port);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto r = c.Post("/v1/chat/completions", chat_body("Hi", 3).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  kill(k.pid, SIGTERM);
  EXPECT_EQ(wait_exit(k.pid, 20000), 0) << read_file_bytes(dir.file("err"));
  close(k.in);
  EXPECT_NE(read_file_bytes(dir.file("err")).find("stopped"), std::string::npos);
}

TEST(ServeCli, BadFlagsAreClearErrors) {
  const CliResult port = run_k3({"serve", "-m", tiny().path, "--port", "70000"});
  EXPECT_EQ(port.exit_code, 1);
  EXPECT_NE(port.err.find("--port"), std::string::npos) << port.err;
  const CliResult ctx = run_k3({"serve", "-m", tiny().path, "-c", "100000"});
  EXPECT_EQ(ctx.exit_code, 1);
  EXPECT_NE(ctx.err.find("max_position_embeddings"), std::string::npos) << ctx.err;
  const CliResult every = run_k3({"serve", "-m", tiny().path, "--cache-every", "40"});
  EXPECT_EQ(every.exit_code, 1);
  EXPECT_NE(every.err.find("multiple of the block size"), std::string::npos) << every.err;
  const CliResult host = run_k3({"serve", "-m", tiny().path, "--host", "203.0.113.7"});
  EXPECT_EQ(host.exit_code, 1);
  EXPECT_NE(host.err.find("cannot listen"), std::string::npos) << host.err;
  setenv("K3_SERVE_STEP_DELAY_MS", "20ms", 1);  // the test knob: an integer or nothing
  const CliResult knob = run_k3({"serve", "-m", tiny().path, "--port", "0"});
  unsetenv("K3_SERVE_STEP_DELAY_MS");
  EXPECT_EQ(knob.exit_code, 1);
  EXPECT_NE(knob.err.find("K3_SERVE_STEP_DELAY_MS"), std::string::npos) << knob.err;
  const CliResult help = run_k3({"serve", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--api-key"), std::string::npos);
}

}  // namespace
}  // namespace k3::test
