#include "sample/stop_strings.h"

#include <algorithm>

#include "core/error.h"

namespace k3 {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

size_t StopStrings::held_suffix() const {
  size_t best = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, buf_.size()); n > best; --n) {
      if (buf_.compare(buf_.size() - n, n, s, 0, n) == 0) {
        best = n;
        break;
      }
    }
  }
  return best;
}

std::string StopStrings::push(std::string_view text) {
  if (matched()) return "";
  buf_ += text;
  size_t first = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    size_t at = buf_.find(stops_[i]);
    if (at < first) {
      first = at;
      matched_ = static_cast<int>(i);
    }
  }
  if (matched()) {
    std::string out = buf_.substr(0, first);
    buf_.clear();
    return out;
  }
  const size_t keep = held_suffix();
  std::string out = buf_.substr(0, buf_.size() - keep);
  buf_.erase(0, buf_.size() - keep);
  return out;
}

std::string StopStrings::finish() {
  std::string out;
  out.swap(buf_);
  return out;
}

const std::string& StopStrings::match() const {
  check(matched(), "no stop string matched");
  return stops_[static_cast<size_t>(matched_)];
}

}  // namespace k3
