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
// open-addressing hash index, plus a merge index: for every way to split a token into two tokens
// (left, right), merged(left, right) gives its rank. Since BPE parts are always tokens, "is the
// concatenation of parts i and i+1 a token, and which" is answered in O(1) without hashing bytes,
// which keeps merges of long tokens (runs of spaces, repeated characters) cheap.
class RankTable {
 public:
  // Takes the tokens in rank order; the caller has checked they are distinct and non-empty.
  // Without `bpe_index` only find() and bytes() work (a plain string -> index map).
  explicit RankTable(const std::vector<std::string>& tokens, bool bpe_index = true);
  RankTable() = default;

  int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }
  // Rank of `bytes`, or -1.
  int32_t find(std::string_view bytes) const;
  std::string_view bytes(int32_t rank) const {
    return std::string_view(blob_).substr(offsets_[rank], offsets_[rank + 1] - offsets_[rank]);
  }
  int32_t byte_rank(unsigned char b) const { return byte_rank_[b]; }  // -1 if absent
  // Rank of bytes(left) + bytes(right), or -1.
  int32_t merged(int32_t left, int32_t right) const {
    uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
    for (uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;; i = (i + 1) & merge_mask_) {
      const MergeSlot& m = merges_[i];
      if (m.rank == -1) return -1;
      if (m.left == uint32_t(left) && m.right == uint32_t(right)) return m.rank;
    }
  }
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
  int32_t byte_rank_[256] = {};
  std::vector<int32_t> pair_rank_;  // 65536 entries
  struct MergeSlot {
    uint32_t left, right;
    int32_t rank;  // -1: empty
  };
  std::vector<MergeSlot> merges_{MergeSlot{0, 0, -1}, MergeSlot{0, 0, -1}};
  uint64_t merge_mask_ = 1;
  int merge_shift_ = 63;
  void build_merges();
};

constexpr size_t kBpeHeapMinBytes = 128;

// Appends the ranks of `piece` (every single byte must be a token) to `out`.
void bpe_encode(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out);
void bpe_merge_linear(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out);
void bpe_merge_heap(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out);

}  // namespace k3::tok
