// The prefix cache: engine snapshots (KDA slot copy + shared MLA latent blocks) of prompt
// prefixes that end on a snapshot boundary (a multiple of `every` tokens, itself a multiple of
// the engine's block size), keyed by a hash of the prefix ids. A new request restores the
// longest cached prefix of its prompt and prefills only the rest.
//
// KDA state cannot be rebuilt from cached keys, so a prefix is reusable only where a snapshot
// was taken; a hit always leaves at least one prompt token to prefill (the request needs the
// logits after its last prompt token), so a prompt that is an exact multiple of `every` hits
// one boundary earlier. Entries carry the layout (model shape, block and boundary size) they
// were written with and are never used by a cache of another layout. Least recently used
// entries are evicted past the byte budget or the entry limit, or on demand when the engine
// needs room (evict_one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "k3/engine.h"

namespace k3::server {

struct CacheLayout {
  std::string model;  // shape fingerprint of the model the snapshots belong to
  int64_t block_tokens = 16;
  int64_t every = 64;
  bool operator==(const CacheLayout&) const = default;
};

CacheLayout layout_of(const Engine& engine, int64_t block_tokens, int64_t every);

struct CacheHit {
  SeqId seq = -1;  // a live sequence holding the first n_tokens ids of the prompt
  int64_t n_tokens = 0;
};

class PrefixCache {
 public:
  // budget_bytes bounds the entries' size (an upper bound: shared blocks counted per entry).
  PrefixCache(Engine& engine, CacheLayout layout, size_t budget_bytes, int64_t max_entries);
  ~PrefixCache();  // drops every snapshot
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // A sequence for `prompt`: restored from the longest cached prefix shorter than the prompt,
  // else a fresh one (n_tokens 0). An entry whose snapshot cannot be restored (never written,
  // dropped behind the cache's back) is removed and the next shorter one tried. Throws
  // k3::Error only when the engine cannot create a sequence at all.
  CacheHit start(std::span<const int32_t> prompt);
  // Remembers `seq`'s state as the prefix `ids` (seq must hold exactly these ids; the length
  // must be a boundary). No-op when disabled or already cached. `layout` must be the cache's.
  void insert(std::span<const int32_t> ids, SeqId seq, const CacheLayout& layout);
  // Adds an existing snapshot as an entry (takes ownership); for tests of broken entries.
  void adopt(std::span<const int32_t> ids, SnapshotId snap);
  bool evict_one();  // drops the least recently used entry; false when empty
  void clear();

  bool enabled() const { return budget_ > 0 && max_entries_ > 0; }
  const CacheLayout& layout() const { return layout_; }
  int64_t entries() const { return static_cast<int64_t>(lru_.size()); }
  size_t bytes() const { return bytes_; }
  // The longest boundary of `prompt` with an entry (0: none); does not touch the LRU order.
  int64_t longest_match(std::span<const int32_t> prompt) const;

 private:
  struct Entry {
    std::vector<int32_t> ids;
    SnapshotId snap;
    size_t bytes;
    uint64_t key;
  };
  using Lru = std::list<Entry>;  // most recent first
  Lru::iterator find(std::span<const int32_t> prefix, uint64_t key) const;
  size_t cost(int64_t n_tokens) const;
  void erase(Lru::iterator it);
  void make_room(size_t bytes);

  Engine& engine_;
  CacheLayout layout_;
  size_t budget_;
  int64_t max_entries_;
  size_t slot_bytes_, block_bytes_;
  size_t bytes_ = 0;
  mutable Lru lru_;
  std::unordered_multimap<uint64_t, Lru::iterator> index_;
};

// FNV-1a over token ids: the key of prefix ids[0, n).
uint64_t prefix_hash(std::span<const int32_t> ids);

}  // namespace k3::server
