#include "tokenizer/unicode_classes.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace k3::tok {

namespace {

// Flags of every code point, expanded from the runs.
std::vector<uint8_t> expand_runs() {
  std::vector<uint8_t> flags(0x110000, 0);
  for (size_t i = 0; i < kUnicodeRunCount; ++i) {
    uint32_t end = i + 1 < kUnicodeRunCount ? kUnicodeRuns[i + 1].start : 0x110000;
    std::memset(flags.data() + kUnicodeRuns[i].start, kUnicodeRuns[i].flags,
                end - kUnicodeRuns[i].start);
  }
  return flags;
}

}  // namespace

CharTable::CharTable() {
  std::vector<uint8_t> flags = expand_runs();
  std::map<std::string, uint16_t> seen;  // block contents -> block number
  index_.resize(0x110000 >> 7);
  for (uint32_t b = 0; b < (0x110000 >> 7); ++b) {
    std::string block(reinterpret_cast<const char*>(flags.data()) + b * 128, 128);
    auto [it, added] = seen.emplace(block, static_cast<uint16_t>(seen.size()));
    if (added) blocks_.insert(blocks_.end(), block.begin(), block.end());
    index_[b] = it->second;
  }
}

const CharTable& char_table() {
  static const CharTable table;
  return table;
}

}  // namespace k3::tok
