// Finds special-token texts in a string: the leftmost occurrence, and at one position the
// longest name (tiktoken's alternation picks among names that match at the same position in
// hash order; K3's names are prefix-free, so the rule only matters for odd configs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"

namespace k3::tok {

class SpecialMatcher {
 public:
  SpecialMatcher() = default;
  explicit SpecialMatcher(const std::vector<std::string>& names);

  struct Match {
    size_t pos = std::string_view::npos;  // npos: no special text at or after `from`
    size_t len = 0;
    int32_t index = -1;  // into the names given to the constructor
  };
  Match find(std::string_view text, size_t from) const;
  int32_t index_of(std::string_view name) const { return names_.find(name); }

 private:
  RankTable names_;                           // name -> index
  std::vector<std::vector<size_t>> lengths_;  // per first byte: name lengths, longest first
};

}  // namespace k3::tok
