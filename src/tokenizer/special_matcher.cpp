#include "tokenizer/special_matcher.h"

#include <algorithm>

namespace k3::tok {

SpecialMatcher::SpecialMatcher(const std::vector<std::string>& names)
    : names_(names, /*bpe_index=*/false), lengths_(256) {
  for (const std::string& name : names) {
    std::vector<size_t>& lens = lengths_[static_cast<unsigned char>(name[0])];
    if (std::find(lens.begin(), lens.end(), name.size()) == lens.end()) lens.push_back(name.size());
  }
  for (auto& lens : lengths_) std::sort(lens.rbegin(), lens.rend());
}

SpecialMatcher::Match SpecialMatcher::find(std::string_view text, size_t from) const {
  for (size_t p = from; p < text.size(); ++p) {
    const std::vector<size_t>& lens = lengths_[static_cast<unsigned char>(text[p])];
    for (size_t len : lens) {
      if (len > text.size() - p) continue;
      int32_t index = names_.find(text.substr(p, len));
      if (index >= 0) return {p, len, index};
    }
  }
  return {};
}

}  // namespace k3::tok
