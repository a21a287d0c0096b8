#include "train/bpe_merges.h"

#include <queue>
#include <unordered_map>

namespace k3::train {
namespace {

using PairKey = uint64_t;
PairKey key_of(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
int32_t left_of(PairKey k) { return static_cast<int32_t>(k >> 32); }
int32_t right_of(PairKey k) { return static_cast<int32_t>(k & 0xffffffffu); }

struct Candidate {
  int64_t count;
  PairKey key;
  // priority_queue pops the largest: higher count first, then the smaller key.
  bool operator<(const Candidate& o) const {
    return count != o.count ? count < o.count : key > o.key;
  }
};

class MergeState {
 public:
  explicit MergeState(BpeWords& w) : words_(w) {
    for (size_t i = 0; i < w.symbols.size(); ++i) {
      const std::vector<int32_t>& s = w.symbols[i];
      for (size_t j = 0; j + 1 < s.size(); ++j) {
        const PairKey k = key_of(s[j], s[j + 1]);
        count_[k] += w.freq[i];
        note_word(k, static_cast<int32_t>(i));
      }
    }
    for (const auto& [k, c] : count_) heap_.push({c, k});
  }

  // The best pair with its current count, or count 0 when none is left.
  Candidate best() {
    while (!heap_.empty()) {
      const Candidate c = heap_.top();
      auto it = count_.find(c.key);
      if (it != count_.end() && it->second == c.count && c.count > 0) return c;
      heap_.pop();  // stale: the count changed after it was pushed
    }
    return {0, 0};
  }

  // Replaces every (a, b) by `merged` in the words that hold it.
  void merge(PairKey pair, int32_t merged) {
    heap_.pop();
    std::vector<int32_t> holders;
    holders.swap(where_[pair]);
    where_.erase(pair);
    delta_.clear();
    for (int32_t wi : holders) merge_in_word(static_cast<size_t>(wi), pair, merged);
    for (const auto& [k, d] : delta_) {
      if (d == 0) continue;
      int64_t& c = count_[k];
      c += d;
      if (c > 0) {
        heap_.push({c, k});
      } else {
        count_.erase(k);
      }
    }
  }

 private:
  void note_word(PairKey k, int32_t wi) {
    std::vector<int32_t>& list = where_[k];
    if (list.empty() || list.back() != wi) list.push_back(wi);
  }

  void merge_in_word(size_t wi, PairKey pair, int32_t merged) {
    std::vector<int32_t>& s = words_.symbols[wi];
    const int32_t a = left_of(pair), b = right_of(pair);
    const int64_t f = words_.freq[wi];
    bool found = false;
    for (size_t j = 0; j + 1 < s.size() && !found; ++j) found = s[j] == a && s[j + 1] == b;
    if (!found) return;  // a stale entry: an earlier merge took the pair out of this word
    for (size_t j = 0; j + 1 < s.size(); ++j) delta_[key_of(s[j], s[j + 1])] -= f;
    size_t out = 0;
    for (size_t j = 0; j < s.size(); ++j) {
      if (j + 1 < s.size() && s[j] == a && s[j + 1] == b) {
        s[out++] = merged;
        ++j;
      } else {
        s[out++] = s[j];
      }
    }
    s.resize(out);
    for (size_t j = 0; j + 1 < s.size(); ++j) {
      const PairKey k = key_of(s[j], s[j + 1]);
      delta_[k] += f;
      // Pairs without the new token were already listed for this word.
      if (s[j] == merged || s[j + 1] == merged) note_word(k, static_cast<int32_t>(wi));
    }
  }

  BpeWords& words_;
  std::unordered_map<PairKey, int64_t> count_, delta_;
  std::unordered_map<PairKey, std::vector<int32_t>> where_;
  std::priority_queue<Candidate> heap_;
};

}  // namespace

std::vector<std::string> byte_tokens() {
  std::vector<std::string> t;
  auto printable = [](int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (int b = 0; b < 256; ++b) {
      if (printable(b) == (pass == 0)) t.push_back(std::string(1, static_cast<char>(b)));
    }
  }
  return t;
}

int64_t learn_merges(BpeWords& words, std::vector<std::string>& tokens, int64_t target,
                     int64_t min_frequency, const std::function<void(int64_t, int64_t)>& progress) {
  std::unordered_map<std::string, int32_t> id_of;
  for (size_t i = 0; i < tokens.size(); ++i) id_of.emplace(tokens[i], static_cast<int32_t>(i));
  MergeState state(words);
  int64_t merges = 0;
  while (static_cast<int64_t>(tokens.size()) < target) {
    const Candidate c = state.best();
    if (c.count < std::max<int64_t>(min_frequency, 1)) break;
    std::string bytes = tokens[size_t(left_of(c.key))] + tokens[size_t(right_of(c.key))];
    auto [it, fresh] = id_of.emplace(bytes, static_cast<int32_t>(tokens.size()));
    if (fresh) tokens.push_back(std::move(bytes));
    state.merge(c.key, it->second);
    ++merges;
    if (progress && (tokens.size() % 256 == 0))
      progress(static_cast<int64_t>(tokens.size()), target);
  }
  return merges;
}

}  // namespace k3::train
