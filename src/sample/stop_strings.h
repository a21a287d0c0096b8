// Stop strings matched on decoded text, across token boundaries. Text that could still turn
// out to be the start of a stop string is held back until it cannot; when a stop string
// appears, the text before it is released and the stop string and everything after it are
// dropped.
//
//   StopStrings stops({"\nUser:"});
//   out += stops.push("Hi\nUs");   // "Hi" ("\nUs" may start "\nUser:")
//   out += stops.push("er: x");    // "" and stops.matched() is now true
//   out += stops.finish();         // "" (after a match), else the held-back text
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k3 {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);  // empty strings are ignored

  std::string push(std::string_view text);  // returns the text that is safe to emit
  std::string finish();                     // the held-back text (none after a match)
  bool matched() const { return matched_ >= 0; }
  const std::string& match() const;  // the stop string that matched; throws if none

 private:
  size_t held_suffix() const;  // longest tail of buf_ that is a proper prefix of a stop string
  std::vector<std::string> stops_;
  std::string buf_;
  int matched_ = -1;
};

}  // namespace k3
