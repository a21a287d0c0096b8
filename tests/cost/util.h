// Shared helpers for the cost tests: the real K3 config and running the k3 binary.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "k3/hparams.h"

namespace k3::cost::test {

inline std::string source_path(const std::string& rel) {
  return std::string(K3_SOURCE_DIR) + "/" + rel;
}

inline const HParams& kimi_k3() {
  static const HParams hp = hparams_from_file(source_path("configs/kimi-k3.json"));
  return hp;
}

// A per-process temporary path: ctest -j runs tests as parallel processes.
inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "_" + name))
      .string();
}

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `k3 <args>` from the source directory; `args` is passed to the shell as is.
inline CliResult run_k3(const std::string& args) {
  std::string cmd =
      "cd " + std::string(K3_SOURCE_DIR) + " && " + K3_CLI_PATH + " " + args + " 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace k3::cost::test
