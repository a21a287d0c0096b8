#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <queue>

namespace k3::tok {

namespace {

uint64_t mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  const char* p = s.data();
  size_t n = s.size();
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = mix(h ^ w) * 0xBF58476D1CE4E5B9ull;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  for (size_t i = 0; i < n; ++i) w |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return mix(h ^ w);
}

constexpr int32_t kNone = std::numeric_limits<int32_t>::max();

}  // namespace

RankTable::RankTable(const std::vector<std::string>& tokens, bool bpe_index) {
  size_t total = 0;
  for (const std::string& t : tokens) total += t.size();
  blob_.reserve(total);
  offsets_.reserve(tokens.size() + 1);
  for (const std::string& t : tokens) {
    blob_ += t;
    offsets_.push_back(static_cast<uint32_t>(blob_.size()));
  }
  size_t cap = 16;
  while (cap < tokens.size() * 2) cap *= 2;
  slots_.assign(cap, Slot{0, -1});
  mask_ = cap - 1;
  for (int32_t r = 0; r < size(); ++r) {
    uint64_t h = hash_bytes(bytes(r));
    uint64_t i = h & mask_;
    while (slots_[i].rank != -1) i = (i + 1) & mask_;
    slots_[i] = Slot{static_cast<uint32_t>(h >> 32), r};
  }
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    byte_rank_[b] = find(std::string_view(&c, 1));
  }
  if (!bpe_index) return;
  build_merges();
  pair_rank_.assign(65536, -1);
  for (int32_t r = 0; r < size(); ++r) {
    std::string_view t = bytes(r);
    if (t.size() == 2)
      pair_rank_[(size_t(static_cast<unsigned char>(t[0])) << 8) |
                 static_cast<unsigned char>(t[1])] = r;
  }
}

void RankTable::build_merges() {
  std::vector<MergeSlot> entries;
  for (int32_t r = 0; r < size(); ++r) {
    std::string_view t = bytes(r);
    for (size_t k = 1; k < t.size(); ++k) {
      int32_t left = find(t.substr(0, k));
      if (left < 0) continue;
      int32_t right = find(t.substr(k));
      if (right >= 0) entries.push_back({uint32_t(left), uint32_t(right), r});
    }
  }
  int bits = 4;
  while ((size_t(1) << bits) < entries.size() * 2) ++bits;
  merges_.assign(size_t(1) << bits, MergeSlot{0, 0, -1});
  merge_mask_ = (uint64_t(1) << bits) - 1;
  merge_shift_ = 64 - bits;
  for (const MergeSlot& e : entries) {
    uint64_t key = (uint64_t(e.left) << 32) | e.right;
    uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;
    while (merges_[i].rank != -1) i = (i + 1) & merge_mask_;
    merges_[i] = e;
  }
}

int32_t RankTable::find(std::string_view s) const {
  if (slots_.empty()) return -1;
  uint64_t h = hash_bytes(s);
  const uint32_t tag = static_cast<uint32_t>(h >> 32);
  for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& slot = slots_[i];
    if (slot.rank == -1) return -1;
    if (slot.tag == tag && bytes(slot.rank) == s) return slot.rank;
  }
}

void bpe_merge_linear(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out) {
  // Part i covers piece[start[i], start[i+1]) and is token self[i]; pair[i] is the rank of parts
  // i and i+1 merged (kNone if that is no token). Short pieces (the common case) use the stack.
  constexpr size_t kStack = kBpeHeapMinBytes + 1;
  uint32_t start_buf[kStack];
  int32_t pair_buf[kStack], self_buf[kStack];
  std::vector<uint32_t> start_vec;
  std::vector<int32_t> pair_vec, self_vec;
  uint32_t* start = start_buf;
  int32_t* pair = pair_buf;
  int32_t* self = self_buf;
  size_t n = piece.size() + 1;  // number of parts + the end sentinel
  if (n > kStack) {
    start_vec.resize(n);
    pair_vec.resize(n);
    self_vec.resize(n);
    start = start_vec.data();
    pair = pair_vec.data();
    self = self_vec.data();
  }
  auto rank_of = [&](size_t i) {  // parts i and i+1 merged, or kNone
    if (i + 2 >= n) return kNone;
    int32_t r = ranks.merged(self[i], self[i + 1]);
    return r < 0 ? kNone : r;
  };
  for (size_t i = 0; i + 1 < n; ++i) {
    start[i] = static_cast<uint32_t>(i);
    self[i] = ranks.byte_rank(static_cast<unsigned char>(piece[i]));
    int32_t r = i + 2 < n ? ranks.pair_rank(piece.data() + i) : -1;
    pair[i] = r < 0 ? kNone : r;
  }
  start[n - 1] = static_cast<uint32_t>(n - 1);
  pair[n - 1] = kNone;
  while (n > 2) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (pair[i] < pair[best]) best = i;
    }
    if (pair[best] == kNone) break;
    self[best] = pair[best];
    // Drop part best+1 (its bytes joined part best).
    for (size_t i = best + 1; i + 1 < n; ++i) {
      start[i] = start[i + 1];
      pair[i] = pair[i + 1];
      self[i] = self[i + 1];
    }
    --n;
    pair[best] = rank_of(best);
    if (best > 0) pair[best - 1] = rank_of(best - 1);
  }
  out.insert(out.end(), self, self + (n - 1));
}

void bpe_merge_heap(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out) {
  // A doubly linked list of parts keyed by their first byte; next[i] == n ends the list.
  const uint32_t n = static_cast<uint32_t>(piece.size());
  std::vector<uint32_t> next(n), prev(n);
  std::vector<int32_t> self(n), pair(n, kNone);  // part i's token; rank of i merged with next
  for (uint32_t i = 0; i < n; ++i) {
    next[i] = i + 1;
    prev[i] = i == 0 ? n : i - 1;
    self[i] = ranks.byte_rank(static_cast<unsigned char>(piece[i]));
  }
  auto rank_of = [&](uint32_t i) {
    if (next[i] >= n) return kNone;
    int32_t r = ranks.merged(self[i], self[next[i]]);
    return r < 0 ? kNone : r;
  };
  using Entry = std::pair<int32_t, uint32_t>;  // (rank, start): smallest first = leftmost min
  std::vector<Entry> initial;
  for (uint32_t i = 0; i + 1 < n; ++i) {
    int32_t r = ranks.pair_rank(piece.data() + i);
    pair[i] = r < 0 ? kNone : r;
    if (r >= 0) initial.push_back({r, i});
  }
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap(std::greater<Entry>(),
                                                                           std::move(initial));
  std::vector<bool> dead(n, false);
  while (!heap.empty()) {
    auto [r, i] = heap.top();
    heap.pop();
    if (dead[i] || pair[i] != r) continue;  // stale entry
    self[i] = r;
    uint32_t j = next[i];
    dead[j] = true;
    next[i] = next[j];
    if (next[j] < n) prev[next[j]] = i;
    pair[i] = rank_of(i);
    if (pair[i] != kNone) heap.push({pair[i], i});
    if (prev[i] < n) {
      pair[prev[i]] = rank_of(prev[i]);
      if (pair[prev[i]] != kNone) heap.push({pair[prev[i]], prev[i]});
    }
  }
  for (uint32_t i = 0; i < n; i = next[i]) out.push_back(self[i]);
}

void bpe_encode(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(ranks.byte_rank(static_cast<unsigned char>(piece[0])));
    return;
  }
  if (int32_t r = ranks.find(piece); r >= 0) {
    out.push_back(r);
    return;
  }
  if (piece.size() < kBpeHeapMinBytes) {
    bpe_merge_linear(ranks, piece, out);
  } else {
    bpe_merge_heap(ranks, piece, out);
  }
}

}  // namespace k3::tok
