#include "server/prefix_cache.h"

#include <algorithm>

#include "k3/error.h"
#include "k3/hparams.h"

namespace k3::server {
namespace {

constexpr uint64_t kFnvBasis = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

uint64_t hash_step(uint64_t h, int32_t id) {
  uint32_t v = static_cast<uint32_t>(id);
  for (int b = 0; b < 4; ++b) {
    h ^= (v >> (8 * b)) & 0xff;
    h *= kFnvPrime;
  }
  return h;
}

}  // namespace

uint64_t prefix_hash(std::span<const int32_t> ids) {
  uint64_t h = kFnvBasis;
  for (int32_t id : ids) h = hash_step(h, id);
  return h;
}

CacheLayout layout_of(const Engine& engine, int64_t block_tokens, int64_t every) {
  const Model& m = engine.model();
  const HParams& hp = m.hparams();
  // Two models with the same state shapes share a layout; the weights differ per process, and
  // a cache never outlives its engine.
  const std::string shape =
      cat("vocab ", m.vocab_size(), " state ", Engine::budget_for(m, 1, block_tokens, block_tokens),
          " kda ", hp.n_layers_of(AttnKind::kda), " mla ", hp.n_layers_of(AttnKind::mla));
  return {shape, block_tokens, every};
}

PrefixCache::PrefixCache(Engine& engine, CacheLayout layout, size_t budget_bytes,
                         int64_t max_entries)
    : engine_(engine),
      layout_(std::move(layout)),
      budget_(budget_bytes),
      max_entries_(max_entries) {
  check(layout_.every > 0 && layout_.block_tokens > 0 && layout_.every % layout_.block_tokens == 0,
        "prefix cache: the snapshot interval ", layout_.every,
        " must be a positive multiple of the block size ", layout_.block_tokens);
  const Model& m = engine.model();
  slot_bytes_ = Engine::budget_for(m, 1, 0, layout_.block_tokens) - 1;
  block_bytes_ =
      Engine::budget_for(m, 1, layout_.block_tokens, layout_.block_tokens) - 1 - slot_bytes_;
}

PrefixCache::~PrefixCache() { clear(); }

size_t PrefixCache::cost(int64_t n_tokens) const {
  // Upper bound: entries share their prefix blocks with each other and with live sequences.
  const int64_t blocks = (n_tokens + layout_.block_tokens - 1) / layout_.block_tokens;
  return slot_bytes_ + static_cast<size_t>(blocks) * block_bytes_;
}

PrefixCache::Lru::iterator PrefixCache::find(std::span<const int32_t> prefix, uint64_t key) const {
  auto [lo, hi] = index_.equal_range(key);
  for (auto it = lo; it != hi; ++it) {
    const Entry& e = *it->second;
    if (std::equal(e.ids.begin(), e.ids.end(), prefix.begin(), prefix.end())) return it->second;
  }
  return lru_.end();
}

int64_t PrefixCache::longest_match(std::span<const int32_t> prompt) const {
  if (!enabled()) return 0;
  int64_t best = 0;
  uint64_t h = kFnvBasis;
  const int64_t limit = static_cast<int64_t>(prompt.size()) - 1;  // keep one token to prefill
  for (int64_t n = 1; n <= limit; ++n) {
    h = hash_step(h, prompt[n - 1]);
    if (n % layout_.every == 0 && find(prompt.subspan(0, n), h) != lru_.end()) best = n;
  }
  return best;
}

CacheHit PrefixCache::start(std::span<const int32_t> prompt) {
  while (enabled()) {
    const int64_t n = longest_match(prompt);
    if (n == 0) break;
    auto it = find(prompt.subspan(0, n), prefix_hash(prompt.subspan(0, n)));
    lru_.splice(lru_.begin(), lru_, it);  // most recent: not the one evicted below
    if (engine_.free_sequences() == 0 && lru_.size() > 1) evict_one();
    try {
      return {engine_.restore(it->snap), n};
    } catch (const Error&) {
      // A snapshot that was never written or was dropped behind the cache's back (or no room
      // left): forget the entry and try a shorter prefix.
      erase(it);
    }
  }
  if (engine_.free_sequences() == 0) evict_one();
  return {engine_.create_sequence(), 0};
}

void PrefixCache::make_room(size_t bytes) {
  while (!lru_.empty() &&
         (bytes_ + bytes > budget_ || static_cast<int64_t>(lru_.size()) >= max_entries_))
    evict_one();
}

void PrefixCache::insert(std::span<const int32_t> ids, SeqId seq, const CacheLayout& layout) {
  if (!enabled() || !(layout == layout_)) return;
  const int64_t n = static_cast<int64_t>(ids.size());
  check(n > 0 && n % layout_.every == 0, "prefix cache: a prefix of ", n,
        " tokens is not on a snapshot boundary of ", layout_.every);
  check(engine_.n_past(seq) == n, "prefix cache: sequence ", seq, " holds ", engine_.n_past(seq),
        " tokens, not the ", n, " of the prefix");
  const uint64_t key = prefix_hash(ids);
  if (find(ids, key) != lru_.end()) return;
  const size_t c = cost(n);
  if (c > budget_) return;
  make_room(c);
  if (engine_.free_sequences() == 0) evict_one();
  if (engine_.free_sequences() == 0) return;  // every entry is a live sequence: skip
  adopt(ids, engine_.snapshot(seq));
}

void PrefixCache::adopt(std::span<const int32_t> ids, SnapshotId snap) {
  const uint64_t key = prefix_hash(ids);
  const size_t c = cost(static_cast<int64_t>(ids.size()));
  lru_.push_front({std::vector<int32_t>(ids.begin(), ids.end()), snap, c, key});
  index_.emplace(key, lru_.begin());
  bytes_ += c;
}

void PrefixCache::erase(Lru::iterator it) {
  auto [lo, hi] = index_.equal_range(it->key);
  for (auto i = lo; i != hi; ++i) {
    if (i->second == it) {
      index_.erase(i);
      break;
    }
  }
  try {
    engine_.drop(it->snap);
  } catch (const Error&) {
    // Already gone (the broken-entry case): nothing is held.
  }
  bytes_ -= it->bytes;
  lru_.erase(it);
}

bool PrefixCache::evict_one() {
  if (lru_.empty()) return false;
  erase(std::prev(lru_.end()));
  return true;
}

void PrefixCache::clear() {
  while (evict_one()) {
  }
}

}  // namespace k3::server
