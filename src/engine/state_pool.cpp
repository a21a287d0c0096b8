#include "engine/state_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "backend/backend.h"
#include "core/error.h"

namespace k3 {
namespace {

enum class Kind : uint8_t { free, seq, snap };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::seq:
      return "sequence";
    case Kind::snap:
      return "snapshot";
    case Kind::free:
      break;
  }
  return "free entry";
}

size_t checked_mul(size_t a, size_t b, const char* what) {
  size_t r = 0;
  check(!__builtin_mul_overflow(a, b, &r), "state pool: ", what, " overflows size_t");
  return r;
}

// Address space reserved once; pages are committed only when first written, so a large
// budget costs nothing until sequences actually use it. On a device backend the storage is
// one device allocation instead (committed at once).
class Mapping {
 public:
  Mapping(size_t bytes, const char* what, Backend* device) : bytes_(bytes), device_(device) {
    if (bytes_ == 0) return;
    if (device_ != nullptr) {
      data_ = static_cast<float*>(device_->alloc(bytes_));
      return;
    }
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    check(p != MAP_FAILED, "state pool: cannot reserve ", bytes_, " bytes of address space for ",
          what, ": ", std::strerror(errno));
    data_ = static_cast<float*>(p);
  }
  ~Mapping() {
    if (data_ == nullptr) return;
    if (device_ != nullptr) {
      device_->free(data_);
    } else {
      munmap(data_, bytes_);
    }
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  float* data() const { return data_; }

 private:
  size_t bytes_ = 0;
  Backend* device_ = nullptr;
  float* data_ = nullptr;
};

// Sizes derived from the model and options, validated before anything is reserved.
struct Geometry {
  int64_t max_entries = 0, block_tokens = 0, max_positions = 0;
  int64_t n_kda = 0, n_mla = 0;
  int64_t conv_floats = 0, state_floats = 0;  // per KDA layer: one conv history, S
  int64_t width = 0;                          // MLA floats per token per layer
  size_t slot_floats = 0, block_floats = 0;
  size_t budget = 0;
  int64_t n_blocks = 0, table_cap = 0;
};

void validate(const HParams& hp, const StatePoolOptions& opt) {
  check(opt.budget_bytes > 0, "state pool: budget_bytes must be positive");
  check(opt.max_entries >= 1, "state pool: max_entries must be at least 1, got ", opt.max_entries);
  check(opt.max_entries <= (int64_t{1} << 20), "state pool: max_entries ", opt.max_entries,
        " is more than the supported 1048576");
  check(opt.block_tokens >= 1, "state pool: block_tokens must be at least 1, got ",
        opt.block_tokens);
  check(hp.n_layer >= 0 && static_cast<int64_t>(hp.attn_kind.size()) == hp.n_layer,
        "state pool: attn_kind lists ", hp.attn_kind.size(), " layers but n_layer is ", hp.n_layer);
  check(hp.max_positions >= 1, "state pool: max_positions must be positive, got ",
        hp.max_positions);
  if (hp.n_layers_of(AttnKind::kda) > 0) {
    check(hp.kda.n_head >= 1 && hp.kda.head_dim >= 1 && hp.kda.conv_kernel >= 1,
          "state pool: KDA layers need n_head, head_dim and conv_kernel >= 1, got ", hp.kda.n_head,
          ", ", hp.kda.head_dim, ", ", hp.kda.conv_kernel);
  }
  if (hp.n_layers_of(AttnKind::mla) > 0) {
    check(hp.mla.kv_lora_rank >= 0 && hp.mla.qk_rope >= 0 && hp.mla.cache_width() >= 1,
          "state pool: MLA layers need a positive cache width (kv_lora_rank + qk_rope), got ",
          hp.mla.cache_width());
  }
}

Geometry make_geometry(const HParams& hp, const StatePoolOptions& opt) {
  validate(hp, opt);
  Geometry g;
  g.max_entries = opt.max_entries;
  g.block_tokens = opt.block_tokens;
  g.max_positions = hp.max_positions;
  g.budget = opt.budget_bytes;
  g.n_kda = hp.n_layers_of(AttnKind::kda);
  g.n_mla = hp.n_layers_of(AttnKind::mla);
  if (g.n_kda > 0) {
    const size_t P = checked_mul(hp.kda.n_head, hp.kda.head_dim, "KDA projection width");
    g.conv_floats = static_cast<int64_t>(checked_mul(P, hp.kda.conv_kernel - 1, "conv history"));
    g.state_floats = static_cast<int64_t>(checked_mul(P, hp.kda.head_dim, "KDA state"));
    const size_t layer = checked_mul(3, g.conv_floats, "KDA slot") + g.state_floats;
    g.slot_floats = checked_mul(layer, g.n_kda, "KDA slot");
  }
  if (g.n_mla > 0) {
    g.width = hp.mla.cache_width();
    g.block_floats =
        checked_mul(checked_mul(g.n_mla, g.block_tokens, "MLA block"), g.width, "MLA block");
  }
  const size_t slot_bytes = checked_mul(g.slot_floats, sizeof(float), "KDA slot");
  const size_t block_bytes = checked_mul(g.block_floats, sizeof(float), "MLA block");
  check(slot_bytes == 0 || static_cast<size_t>(g.max_entries) <= g.budget / slot_bytes,
        "state pool: budget ", g.budget, " bytes cannot hold ", g.max_entries, " KDA slots of ",
        slot_bytes, " bytes each (", g.max_entries, " x ", slot_bytes,
        " bytes needed before any MLA block); raise the budget or lower max_entries");
  if (block_bytes > 0) {
    const size_t rest = g.budget - g.max_entries * slot_bytes;
    // Block ids are int32 in the tables handed to the attention kernels.
    g.n_blocks = static_cast<int64_t>(
        std::min<size_t>(rest / block_bytes, std::numeric_limits<int32_t>::max()));
    const int64_t per_seq = (g.max_positions - 1) / g.block_tokens + 1;  // max_positions >= 1
    g.table_cap = std::min(g.n_blocks, per_seq);
  }
  return g;
}

}  // namespace

struct StatePool::Impl {
  struct Entry {
    int64_t id = -1;  // current id, -1 while free
    Kind kind = Kind::free;
    int64_t n_past = 0;
    int64_t reserved = 0;  // tokens that may be written (advance/mla_row limit)
    int64_t n_table = 0;
    int32_t* table = nullptr;  // table_cap ids, preallocated
  };

  Backend* device;  // null: host memory
  Geometry g;
  Mapping slots;
  Mapping blocks;
  std::vector<Entry> entries;
  std::vector<int64_t> generation;  // bumped on every release so old ids go stale
  std::vector<int64_t> free_entry;  // stack of entry indices
  int64_t n_free_entries = 0;
  std::vector<int32_t> tables;
  std::vector<int32_t> refs;
  std::vector<int32_t> free_block;  // stack of block ids
  int64_t n_free_blocks = 0;

  Impl(const Geometry& geo, Backend* dev)
      : device(dev),
        g(geo),
        slots(checked_mul(g.slot_floats * sizeof(float), g.max_entries, "slot storage"),
              "KDA slots", dev),
        blocks(checked_mul(g.block_floats * sizeof(float), g.n_blocks, "block storage"),
               "MLA blocks", dev),
        entries(g.max_entries),
        generation(g.max_entries, 0),
        free_entry(g.max_entries),
        tables(checked_mul(g.max_entries, g.table_cap, "block tables")),
        refs(g.n_blocks, 0),
        free_block(g.n_blocks) {
    // Stacks pop from the back: push in reverse so entry 0 and block 0 are handed out first.
    for (int64_t i = 0; i < g.max_entries; ++i) {
      entries[i].table = tables.data() + i * g.table_cap;
      free_entry[n_free_entries++] = g.max_entries - 1 - i;
    }
    for (int64_t b = 0; b < g.n_blocks; ++b) {
      free_block[n_free_blocks++] = static_cast<int32_t>(g.n_blocks - 1 - b);
    }
  }

  size_t slot_bytes() const { return g.slot_floats * sizeof(float); }
  size_t block_bytes() const { return g.block_floats * sizeof(float); }
  int64_t index_of(const Entry& e) const { return &e - entries.data(); }
  float* slot(const Entry& e) const { return slots.data() + index_of(e) * g.slot_floats; }
  float* block_rows(int32_t b, int64_t mla_index) const {
    return blocks.data() + b * g.block_floats + mla_index * g.block_tokens * g.width;
  }
  // Guarded: with no KDA layers the slot storage is null and memset/memcpy must not see it.
  void zero_slot(const Entry& e) {
    if (g.slot_floats == 0) return;
    if (device != nullptr) {
      device->zero(slot(e), slot_bytes());
    } else {
      std::memset(slot(e), 0, slot_bytes());
    }
  }
  void copy_slot(const Entry& src, const Entry& dst) {
    if (g.slot_floats > 0) copy_bytes(slot(dst), slot(src), slot_bytes());
  }
  void copy_bytes(float* dst, const float* src, size_t n) {
    if (device != nullptr) {
      device->copy_on_device(dst, src, n);
    } else {
      std::memcpy(dst, src, n);
    }
  }
  int64_t blocks_for(int64_t tokens) const {
    return g.n_mla == 0 || tokens == 0 ? 0 : (tokens - 1) / g.block_tokens + 1;
  }

  // --- ids ---

  const Entry* find(int64_t id) const {
    if (id < 0) return nullptr;
    const Entry& e = entries[id % g.max_entries];
    return e.id == id ? &e : nullptr;
  }
  Entry& get(int64_t id, Kind want, const char* op) {
    return const_cast<Entry&>(std::as_const(*this).get(id, want, op));
  }
  const Entry& get(int64_t id, Kind want, const char* op) const {
    const Entry* e = find(id);
    if (e == nullptr) {
      fail("state pool: ", op, ": unknown ", kind_name(want), " id ", id,
           " (released, dropped or never created)");
    }
    if (e->kind != want) {
      fail("state pool: ", op, ": id ", id, " is a ", kind_name(e->kind), ", not a ",
           kind_name(want));
    }
    return *e;
  }
  // Read-only queries accept sequences and snapshots alike.
  const Entry& get_any(int64_t id, const char* op) const {
    const Entry* e = find(id);
    if (e == nullptr) {
      fail("state pool: ", op, ": unknown id ", id, " (released, dropped or never created)");
    }
    return *e;
  }

  // --- entries ---

  Entry& take_entry(Kind kind, const char* op) {
    if (n_free_entries == 0) fail_no_entry(op);
    const int64_t i = free_entry[--n_free_entries];
    Entry& e = entries[i];
    e.id = generation[i] * g.max_entries + i;
    e.kind = kind;
    e.n_past = e.reserved = e.n_table = 0;
    return e;
  }
  [[noreturn]] void fail_no_entry(const char* op) const {
    int64_t n_seq = 0, n_snap = 0;
    for (const Entry& e : entries) {
      n_seq += e.kind == Kind::seq;
      n_snap += e.kind == Kind::snap;
    }
    fail("state pool: ", op, ": no free entries: all ", g.max_entries, " are held (", n_seq,
         " sequences, ", n_snap, " snapshots; each holds a KDA slot of ", slot_bytes(),
         " bytes); release sequences, drop snapshots or raise max_entries");
  }
  void free_entry_of(Entry& e) {
    drop_blocks(e);
    const int64_t i = index_of(e);
    ++generation[i];
    e.id = -1;
    e.kind = Kind::free;
    free_entry[n_free_entries++] = i;
  }

  // --- blocks ---

  int32_t take_block() {
    const int32_t b = free_block[--n_free_blocks];
    refs[b] = 1;
    return b;
  }
  void unref(int32_t b) {
    if (--refs[b] == 0) free_block[n_free_blocks++] = b;
  }
  void drop_blocks(Entry& e) {
    // Reverse order so the next reserve() gets them back in position order.
    for (int64_t j = e.n_table - 1; j >= 0; --j) unref(e.table[j]);
    e.n_table = 0;
    e.reserved = 0;
  }
  // Shares the blocks holding `src`'s first n_past tokens with `dst` (never the spare
  // reserved blocks past them: those stay private to `src`).
  void share_prefix(const Entry& src, Entry& dst) {
    dst.n_past = src.n_past;
    dst.reserved = src.n_past;
    dst.n_table = blocks_for(src.n_past);
    for (int64_t j = 0; j < dst.n_table; ++j) {
      dst.table[j] = src.table[j];
      ++refs[dst.table[j]];
    }
    copy_slot(src, dst);
  }
  // The partly filled tail block, when another entry shares it; else -1.
  int64_t shared_tail(const Entry& e) const {
    if (g.n_mla == 0 || e.n_past % g.block_tokens == 0) return -1;
    const int64_t j = e.n_past / g.block_tokens;
    return refs[e.table[j]] > 1 ? j : -1;
  }
  void copy_on_write(Entry& e, int64_t j) {
    const int32_t old = e.table[j];
    const int32_t fresh = take_block();
    const size_t filled = (e.n_past % g.block_tokens) * g.width * sizeof(float);
    for (int64_t i = 0; i < g.n_mla; ++i) {
      copy_bytes(block_rows(fresh, i), block_rows(old, i), filled);
    }
    e.table[j] = fresh;
    unref(old);
  }

  // Fresh blocks reserve(seq, n_new) would take (the copy of a shared tail included).
  int64_t blocks_needed(int64_t seq, int64_t n_new, const char* op) const {
    const Entry& e = get(seq, Kind::seq, op);
    check(n_new >= 0, "state pool: reserve: sequence ", seq, ": negative token count ", n_new);
    check(n_new <= g.max_positions - e.n_past, "state pool: reserve: sequence ", seq,
          " would hold more than max_positions ", g.max_positions, " tokens (", e.n_past,
          " cached + ", n_new, " new)");
    const int64_t fresh = std::max<int64_t>(0, blocks_for(e.n_past + n_new) - e.n_table);
    return fresh + (n_new > 0 && shared_tail(e) >= 0 ? 1 : 0);
  }

  void reserve(int64_t seq, int64_t n_new) {
    const int64_t need = blocks_needed(seq, n_new, "reserve");
    Entry& e = get(seq, Kind::seq, "reserve");
    const int64_t total = e.n_past + n_new;
    const int64_t cow = n_new > 0 ? shared_tail(e) : -1;
    const int64_t fresh = std::max<int64_t>(0, blocks_for(total) - e.n_table);
    if (need > n_free_blocks) {
      fail("state pool: no free MLA blocks: sequence ", seq, " needs ", need, " more blocks of ",
           g.block_tokens, " tokens", cow >= 0 ? " (one to copy a shared tail)" : "", ", ",
           n_free_blocks, " free of ", g.n_blocks, " (budget ", g.budget,
           " bytes); release sequences or raise the budget");
    }
    if (cow >= 0) copy_on_write(e, cow);
    for (int64_t j = 0; j < fresh; ++j) e.table[e.n_table++] = take_block();
    e.reserved = std::max(e.reserved, total);
  }

  void advance(int64_t seq, int64_t n) {
    Entry& e = get(seq, Kind::seq, "advance");
    check(n >= 0, "state pool: advance: sequence ", seq, ": negative token count ", n);
    check(n <= e.reserved - e.n_past, "state pool: advance: sequence ", seq, " has ", e.n_past,
          " tokens and room for ", e.reserved, "; cannot append ", n, " (call reserve() first)");
    check(n == 0 || shared_tail(e) < 0, "state pool: advance: sequence ", seq,
          " appends into a tail block it shares with a snapshot; call reserve() first");
    e.n_past += n;
  }

  float* mla_row(int64_t seq, int64_t mla_index, int64_t t) {
    const Entry& e = get(seq, Kind::seq, "mla_row");
    check_mla_index(mla_index, "mla_row");
    check(t >= 0 && t < e.reserved, "state pool: mla_row: position ", t, " of sequence ", seq,
          " is not reserved (room for ", e.reserved, " tokens; call reserve() first)");
    const int32_t b = e.table[t / g.block_tokens];
    check(refs[b] == 1, "state pool: mla_row: position ", t, " of sequence ", seq,
          " lies in block ", b, " shared by ", refs[b],
          " holders; call reserve() after snapshot()/restore() so the tail is copied first");
    return block_rows(b, mla_index) + (t % g.block_tokens) * g.width;
  }

  PagedRows mla(int64_t seq, int64_t mla_index) const {
    const Entry& e = get(seq, Kind::seq, "mla");
    check_mla_index(mla_index, "mla");
    PagedRows r;
    r.base = blocks.data() + mla_index * g.block_tokens * g.width;
    r.blocks = e.table;
    r.block_tokens = g.block_tokens;
    r.block_stride = static_cast<int64_t>(g.block_floats);
    r.width = g.width;
    return r;
  }

  KdaSlotView kda(int64_t seq, int64_t kda_index) {
    const Entry& e = get(seq, Kind::seq, "kda");
    check(kda_index >= 0 && kda_index < g.n_kda, "state pool: kda: layer index ", kda_index,
          " out of range (the model has ", g.n_kda, " KDA layers)");
    float* p = slot(e) + kda_index * (3 * g.conv_floats + g.state_floats);
    return {p, p + g.conv_floats, p + 2 * g.conv_floats, p + 3 * g.conv_floats};
  }

  void check_mla_index(int64_t mla_index, const char* op) const {
    check(mla_index >= 0 && mla_index < g.n_mla, "state pool: ", op, ": MLA layer index ",
          mla_index, " out of range (the model has ", g.n_mla, " MLA layers)");
  }
};

StatePool::StatePool(const HParams& hp, StatePoolOptions opt)
    : impl_(new Impl(make_geometry(hp, opt), opt.device)) {}

StatePool::~StatePool() { delete impl_; }

SeqId StatePool::create() {
  Impl::Entry& e = impl_->take_entry(Kind::seq, "create");
  impl_->zero_slot(e);
  return e.id;
}

void StatePool::release(SeqId seq) { impl_->free_entry_of(impl_->get(seq, Kind::seq, "release")); }

void StatePool::reset(SeqId seq) {
  Impl::Entry& e = impl_->get(seq, Kind::seq, "reset");
  impl_->drop_blocks(e);
  e.n_past = 0;
  impl_->zero_slot(e);
}

SnapshotId StatePool::snapshot(SeqId seq) {
  const Impl::Entry& src = impl_->get(seq, Kind::seq, "snapshot");
  Impl::Entry& dst = impl_->take_entry(Kind::snap, "snapshot");
  impl_->share_prefix(src, dst);
  return dst.id;
}

SeqId StatePool::restore(SnapshotId snap) {
  const Impl::Entry& src = impl_->get(snap, Kind::snap, "restore");
  Impl::Entry& dst = impl_->take_entry(Kind::seq, "restore");
  impl_->share_prefix(src, dst);
  return dst.id;
}

void StatePool::drop(SnapshotId snap) {
  impl_->free_entry_of(impl_->get(snap, Kind::snap, "drop"));
}

void StatePool::reserve(SeqId seq, int64_t n_new) { impl_->reserve(seq, n_new); }
int64_t StatePool::blocks_needed(SeqId seq, int64_t n_new) const {
  return impl_->blocks_needed(seq, n_new, "blocks_needed");
}
void StatePool::advance(SeqId seq, int64_t n) { impl_->advance(seq, n); }

int64_t StatePool::n_past(SeqId seq) const { return impl_->get_any(seq, "n_past").n_past; }

bool StatePool::is_live(SeqId seq) const {
  const Impl::Entry* e = impl_->find(seq);
  return e != nullptr && e->kind == Kind::seq;
}

KdaSlotView StatePool::kda(SeqId seq, int64_t kda_index) { return impl_->kda(seq, kda_index); }

PagedRows StatePool::mla(SeqId seq, int64_t mla_index) const { return impl_->mla(seq, mla_index); }

float* StatePool::mla_row(SeqId seq, int64_t mla_index, int64_t t) {
  return impl_->mla_row(seq, mla_index, t);
}

int64_t StatePool::block_tokens() const { return impl_->g.block_tokens; }
int64_t StatePool::n_blocks() const { return impl_->g.n_blocks; }
int64_t StatePool::free_blocks() const { return impl_->n_free_blocks; }
int64_t StatePool::max_entries() const { return impl_->g.max_entries; }
int64_t StatePool::free_entries() const { return impl_->n_free_entries; }
size_t StatePool::slot_bytes() const { return impl_->slot_bytes(); }
size_t StatePool::block_bytes() const { return impl_->block_bytes(); }

int32_t StatePool::block_refs(int32_t block) const {
  check(block >= 0 && block < impl_->g.n_blocks, "state pool: block_refs: block ", block,
        " out of range (the pool has ", impl_->g.n_blocks, " blocks)");
  return impl_->refs[block];
}

std::vector<int32_t> StatePool::block_table(SeqId seq) const {
  const Impl::Entry& e = impl_->get_any(seq, "block_table");
  return {e.table, e.table + e.n_table};
}

}  // namespace k3
