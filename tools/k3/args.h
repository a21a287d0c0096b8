// A small declarative command-line parser shared by every `k3` subcommand: each command lists
// its options once (name, short alias, value name, help, default) and gets --help for free.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace k3::cli {

struct Option {
  std::string name;        // long name without dashes: "model"
  std::string alias;       // short name without dash: "m" (may be empty)
  std::string value_name;  // "DIR"; empty for a boolean switch
  std::string help;
  std::string default_value;  // shown in --help; empty means none
};

class Args {
 public:
  Args(std::string command, std::string usage, std::string summary, std::vector<Option> options);

  // Parses argv (argv[0] is the subcommand name). Returns false when --help was printed.
  // Throws k3::Error on an unknown option, a missing value or a stray positional argument.
  bool parse(int argc, char** argv);

  bool has(const std::string& name) const;         // given on the command line, or has a default
  std::string str(const std::string& name) const;  // throws if absent
  int64_t integer(const std::string& name) const;  // throws if absent or not an integer
  double number(const std::string& name) const;
  // Every value given for a repeatable option, in order (str() returns the last one).
  std::vector<std::string> all(const std::string& name) const;
  std::string help() const;

 private:
  const Option* find(const std::string& token) const;
  std::string command_, usage_, summary_;
  std::vector<Option> options_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> given_;  // every value from the command line
};

// Parses "1,2,3" into integers; names `what` in the error.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);

}  // namespace k3::cli
