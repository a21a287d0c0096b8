// Shared by the test binaries that drive the built `k3` command: a self-removing temp
// directory, and run_k3(), which runs the CLI with given arguments, stdin and environment and
// captures its exit code, stdout and stderr. Header-only so every test folder can use it.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace k3::test {

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("k3_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes a file in the directory and returns its path.
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream(file(name), std::ios::binary) << content;
    return file(name);
  }

 private:
  std::string path_;
};

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CliResult {
  int exit_code;  // 128 + signal when the process was killed by one
  std::string out, err;
};

inline CliResult run_k3(const std::vector<std::string>& args, const std::string& stdin_data = "",
                        const std::map<std::string, std::string>& env = {}) {
  TempDir dir;
  dir.write("stdin", stdin_data);
  std::string cmd = "env";
  for (const auto& [k, v] : env) cmd += " " + shell_quote(k + "=" + v);
  cmd += " " + shell_quote(K3_CLI_PATH);
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  cmd += " <" + shell_quote(dir.file("stdin")) + " >" + shell_quote(dir.file("out")) + " 2>" +
         shell_quote(dir.file("err"));
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file_bytes(dir.file("out"));
  r.err = read_file_bytes(dir.file("err"));
  return r;
}

// A k3 process started in the background with a pipe as standard input and files for its
// outputs (for tests that signal it or feed it slowly). Close `in` to send EOF.
struct SpawnedK3 {
  pid_t pid = -1;
  int in = -1;  // the child's stdin
};

inline SpawnedK3 spawn_k3(const std::vector<std::string>& args, const std::string& out,
                          const std::string& err) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("spawn_k3: pipe failed");
  SpawnedK3 c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fds[0], 0);
    close(fds[1]);
    if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr))
      _exit(126);
    std::vector<char*> argv = {const_cast<char*>(K3_CLI_PATH)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(K3_CLI_PATH, argv.data());
    _exit(127);
  }
  close(fds[0]);
  c.in = fds[1];
  return c;
}

}  // namespace k3::test
