// `k3 init` cannot hurt: it refuses a disk too small for the checkpoint or a non-empty directory
// (unless --force), writes shards under temporary names, and cleans up on Ctrl-C. And `k3 run`
// warns before loading a model that maps more than the machine's memory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/cli_harness.h"
#include "common/tiny_model.h"

namespace k3::test {
namespace {
namespace fs = std::filesystem;

const std::string kTinyConfig = K3_SOURCE_DIR "/tests/data/models/c1_tiny/config.json";
const std::string kSliceConfig = K3_SOURCE_DIR "/bench/k3-slice-4layer-32experts.json";

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

bool has_temp_or_shard(const std::string& dir) {
  for (const std::string& n : files_in(dir)) {
    if (n.rfind(".tmp-", 0) == 0 || n.find(".safetensors") != std::string::npos) return true;
  }
  return false;
}

TEST(InitSafety, RefusesWhenTheDiskIsTooSmallAndWritesNothing) {
  TempDir tmp;
  const std::string out = tmp.file("ckpt");
  CliResult r =
      run_k3({"init", "--config", kTinyConfig, "-o", out}, "", {{"K3_INIT_FREE_BYTES", "1000"}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("GB but only 0.00 GB is free"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));

  r = run_k3({"init", "--config", kTinyConfig, "-o", out, "--force"}, "",
             {{"K3_INIT_FREE_BYTES", "1000"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out + "/model-00001-of-000001.safetensors"));
}

TEST(InitSafety, TheFullModelDoesNotFitHere) {
  TempDir tmp;
  CliResult r =
      run_k3({"init", "--config", K3_SOURCE_DIR "/configs/kimi-k3.json", "-o", tmp.file("k3")});
  if (r.exit_code == 0) GTEST_SKIP() << "this machine has room for 1.56 TB";
  EXPECT_NE(r.err.find("needs 1559.97 GB but only"), std::string::npos) << r.err;
  EXPECT_TRUE(files_in(tmp.path()).empty());
}

TEST(InitSafety, RefusesANonEmptyDirectoryWithoutForce) {
  TempDir tmp;
  tmp.write("precious.txt", "keep me");
  CliResult r = run_k3({"init", "--config", kTinyConfig, "-o", tmp.path()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not empty"), std::string::npos) << r.err;
  EXPECT_EQ(files_in(tmp.path()).size(), 1u);

  r = run_k3({"init", "--config", kTinyConfig, "-o", tmp.path(), "--force"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file_bytes(tmp.file("precious.txt")), "keep me");
  EXPECT_TRUE(fs::exists(tmp.file("config.json")));
}

TEST(InitSafety, ANormalInitLeavesNoTemporaryFiles) {
  TempDir tmp;
  CliResult r = run_k3({"init", "--config", kTinyConfig, "-o", tmp.path(), "--shard-gb", "0.0001"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int shards = 0;
  for (const std::string& n : files_in(tmp.path())) {
    EXPECT_NE(n.rfind(".tmp-", 0), 0u) << n;
    shards += n.find(".safetensors") != std::string::npos && n.find("index") == std::string::npos;
  }
  EXPECT_GT(shards, 1);
  EXPECT_TRUE(fs::exists(tmp.file("model.safetensors.index.json")));
  EXPECT_TRUE(fs::exists(tmp.file("config.json")));
}

TEST(InitSafety, CtrlCExits130AndLeavesNoPartialShard) {
  TempDir tmp;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("K3_INIT_FREE_BYTES", "1000000000000000", 1);
    dup2(open("/dev/null", O_WRONLY), STDERR_FILENO);
    execl(K3_CLI_PATH, K3_CLI_PATH, "init", "--config", kSliceConfig.c_str(), "-o",
          tmp.path().c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(kill(pid, SIGINT), 0);
  const auto sent = std::chrono::steady_clock::now();
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - sent < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "k3 init still running 5 s after SIGINT";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_LT(waited, 1.0);
  EXPECT_FALSE(has_temp_or_shard(tmp.path()));
  EXPECT_TRUE(files_in(tmp.path()).empty());
}

TEST(ResourceWarning, RunWarnsWhenTheModelExceedsMemory) {
  const TempDir dir;
  const std::string kModel = make_tiny_chat_model(dir);
  const std::string warning = "k3: warning: the model maps ";
  CliResult r =
      run_k3({"run", "-m", kModel, "-p", "hi", "-n", "1"}, "", {{"K3_MEM_BYTES", "1000"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GB but this machine has 0.00 GB of memory"), std::string::npos) << r.err;

  r = run_k3({"run", "-m", kModel, "-p", "hi", "-n", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find(warning), std::string::npos) << r.err;

  r = run_k3({"perplexity", "-m", kModel}, "hello world, hello world", {{"K3_MEM_BYTES", "1000"}});
  EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3::test
