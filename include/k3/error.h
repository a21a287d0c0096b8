// Errors: one exception type, k3::Error (a std::runtime_error), carrying a message that names
// the file, tensor, field or request at fault, what was expected and what was found. The
// library throws it; tools catch it at the top and turn it into a message + non-zero exit.
//
//   try {
//     auto model = k3::Model::load(dir);
//   } catch (const k3::Error& e) {
//     std::fprintf(stderr, "error: %s\n", e.what());
//   }
//   k3::check(n > 0, "--ctx must be positive, found ", n);   // throws k3::Error when false
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

// K3_CHECK(cond, "message parts"...): like check(), but the message parts are evaluated only
// when cond is false. Use it when a part is costly or recursive (a JSON value's dump()), so the
// passing path does no such work.
#define K3_CHECK(cond, ...)               \
  do {                                    \
    if (!(cond)) ::k3::fail(__VA_ARGS__); \
  } while (false)

// Thrown when work is stopped through a cancel flag (Engine/Sequence/Session::set_cancel_flag,
// e.g. set by Ctrl-C). A k3::Error, so code that catches Error still catches it.
class Cancelled : public Error {
 public:
  explicit Cancelled(const std::string& what = "cancelled") : Error(what) {}
};

}  // namespace k3
