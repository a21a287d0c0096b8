// tiktoken's rank-BPE (spec §10.1) over one pre-token: if the whole piece is a token, that token;
// otherwise start from single bytes and repeatedly merge the adjacent pair whose concatenation
// has the lowest rank (leftmost on ties) until no adjacent pair is a token.
//
// Two implementations give identical output: bpe_merge_linear rescans all pairs after each
// merge like tiktoken (quadratic in the piece length, fastest for short pieces), and
// bpe_merge_heap keeps the pairs in a heap ordered by (rank, position), O(n log n). bpe_encode
// picks by length; tests compare the two.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace k3::tok {

// Token bytes <-> rank for ranks 0..n-1 (rank = id), in one block of memory with an
// open-addressing hash index.
class RankTable {
 public:
  // Takes the tokens in rank order; the caller has checked they are distinct and non-empty.
  explicit RankTable(const std::vector<std::string>& tokens);
  RankTable() = default;

  int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }
  // Rank of `bytes`, or -1.
  int32_t find(std::string_view bytes) const;
  std::string_view bytes(int32_t rank) const {
    return std::string_view(blob_).substr(offsets_[rank], offsets_[rank + 1] - offsets_[rank]);
  }
  int32_t byte_rank(unsigned char b) const { return byte_rank_[b]; }  // -1 if absent
  // Rank of the two bytes p[0] p[1], or -1: a dense table, since BPE asks this for every pair.
  int32_t pair_rank(const char* p) const {
    return pair_rank_[(size_t(static_cast<unsigned char>(p[0])) << 8) |
                      static_cast<unsigned char>(p[1])];
  }

 private:
  std::string blob_;
  std::vector<uint32_t> offsets_{0};
  struct Slot {
    uint32_t tag;  // high half of the hash: most misses end without touching the bytes
    int32_t rank;  // -1: empty
  };
  std::vector<Slot> slots_;  // open addressing, linear probing; size a power of two
  uint64_t mask_ = 0;
  int32_t byte_rank_[256];
  std::vector<int32_t> pair_rank_;  // 65536 entries
};

constexpr size_t kBpeHeapMinBytes = 128;

// Appends the ranks of `piece` (every single byte must be a token) to `out`.
void bpe_encode(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out);
void bpe_merge_linear(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out);
void bpe_merge_heap(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out);

}  // namespace k3::tok
