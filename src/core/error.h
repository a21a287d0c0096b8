// Errors: one exception type carrying a message that names the file, tensor, field or request
// at fault, what was expected and what was found. Library code throws k3::Error; the CLI and
// server catch it at the top and turn it into a message + non-zero exit (or a 4xx).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace k3 {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Concatenates any streamable values into one string: cat("tensor ", name, " has ", n, " dims").
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

// check(cond, "message parts"...) throws k3::Error with the message when cond is false.
template <typename... Args>
void check(bool cond, const Args&... args) {
  if (!cond) fail(args...);
}

}  // namespace k3
