// A small declarative command-line parser shared by every `k3` subcommand: each command lists
// its options once (name, short alias, value name, help, default) and gets --help for free.
// Options shared by several commands are declared once in common_options.h.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace k3::cli {

struct Option {
  Option(std::string name_, std::string alias_, std::string value_name_, std::string help_,
         std::string default_value_)
      : name(std::move(name_)),
        alias(std::move(alias_)),
        value_name(std::move(value_name_)),
        help(std::move(help_)),
        default_value(std::move(default_value_)) {}

  // The value must be an integer in [lo, hi]; checked when the command line is parsed.
  Option& range(int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max()) {
    ranged = true;
    min = lo;
    max = hi;
    return *this;
  }
  // Another accepted long spelling (without dashes), e.g. "ctx" for "ctx-size".
  Option& also(std::string long_name) {
    other_names.push_back(std::move(long_name));
    return *this;
  }

  std::string name;        // long name without dashes: "model"
  std::string alias;       // short name without dash: "m" (may be empty)
  std::string value_name;  // "DIR"; empty for a boolean switch
  std::string help;
  std::string default_value;  // shown in --help; empty means none
  std::vector<std::string> other_names;
  bool ranged = false;
  int64_t min = 0, max = 0;
};

class Args {
 public:
  Args(std::string command, std::string usage, std::string summary, std::vector<Option> options);

  // Parses argv (argv[0] is the subcommand name). Returns false when --help was printed.
  // Throws k3::Error on an unknown option (suggesting the nearest), a missing value, a value
  // out of its range or a stray positional argument. "-n2" is "-n 2"; "--name=V" is "--name V".
  bool parse(int argc, char** argv);

  bool has(const std::string& name) const;         // given on the command line, or has a default
  bool given(const std::string& name) const;       // given on the command line
  std::string str(const std::string& name) const;  // throws if absent
  int64_t integer(const std::string& name) const;  // throws if absent or not an integer
  double number(const std::string& name) const;
  // Every value given for a repeatable option, in order (str() returns the last one).
  std::vector<std::string> all(const std::string& name) const;
  // Throws unless `name` is also given, when any of `options` is: "--system needs --chat".
  void only_with(const std::vector<std::string>& options, const std::string& name) const;
  std::string help() const;
  const std::vector<Option>& options() const { return options_; }

 private:
  const Option* find(const std::string& token) const;
  std::string command_, usage_, summary_;
  std::vector<Option> options_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> given_;  // every value from the command line
  std::map<std::string, std::string> spelled_;             // how the user wrote each option
};

// Parses "1,2,3" into integers; names `what` in the error.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);

// Levenshtein distance, and the candidate nearest to `word` when it is close enough to be a
// likely typo ("" otherwise).
size_t edit_distance(const std::string& a, const std::string& b);
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace k3::cli
