// The state pool: every sequence's decode state in one budgeted allocation (spec §2.1).
//
//  * KDA slots: one fixed-size slot per live sequence (or snapshot) holding, for every KDA
//    layer, the conv histories of q/k/v ([P, W-1] each, oldest first) and the recurrent state
//    S ([H, K, V]), all fp32. A slot is zeroed when a fresh sequence gets it.
//  * Paged MLA latent cache: blocks of `block_tokens` tokens; one block holds those tokens'
//    latent rows (Dc + Dr scalars each) for every MLA layer. A sequence owns a block table;
//    blocks are reference-counted so a snapshot and the sequences restored from it share their
//    prefix blocks. A block is only written while its reference count is 1: appending into a
//    shared, partly filled tail block first copies it (copy-on-write), and full blocks are
//    never written again. Shared prefix blocks are therefore never written by a second sequence.
//
// Snapshots exist because KDA state cannot be rebuilt from cached keys: to resume from a
// shared prefix, the recurrent state at the end of that prefix must be saved. snapshot() copies
// the slot and shares the blocks; restore() makes a new, independent sequence from it.
//
// Storage is reserved once (virtual memory, pages committed when first written), so the pool
// never allocates on the heap after construction: ids, block tables and free lists are all
// sized up front. Every failure (budget or slots exhausted, unknown id) throws k3::Error and
// leaves the pool unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/paged_rows.h"
#include "k3/hparams.h"

namespace k3 {

using SeqId = int64_t;       // a live sequence
using SnapshotId = int64_t;  // a saved state; never stepped, only restored or dropped

struct StatePoolOptions {
  size_t budget_bytes = size_t{1} << 30;  // KDA slots + MLA blocks together
  int64_t max_entries = 8;                // live sequences + snapshots (each holds one slot)
  int64_t block_tokens = 16;              // MLA tokens per block
  Backend* device = nullptr;              // where the state lives (null: host memory)
};

// One KDA layer's state inside a slot.
struct KdaSlotView {
  float* conv_q;  // [P, W-1]
  float* conv_k;  // [P, W-1]
  float* conv_v;  // [P, W-1]
  float* S;       // [H, K, V]
};

class StatePool {
 public:
  StatePool(const HParams& hp, StatePoolOptions opt);
  ~StatePool();
  StatePool(const StatePool&) = delete;
  StatePool& operator=(const StatePool&) = delete;

  // A new empty sequence (zero KDA state, no cached tokens).
  SeqId create();
  // Frees the sequence's slot and drops its block references.
  void release(SeqId seq);
  // Back to zero state and no tokens, keeping the id.
  void reset(SeqId seq);

  // Saves the sequence's state at its current length; costs one slot, shares the blocks.
  SnapshotId snapshot(SeqId seq);
  // A new sequence starting from the snapshot (the snapshot stays valid).
  SeqId restore(SnapshotId snap);
  void drop(SnapshotId snap);

  // Makes room for n_new more tokens: copies a shared partly filled tail block, then takes
  // fresh blocks. Throws (and changes nothing) when the budget has too few free blocks or the
  // length would exceed max_positions.
  void reserve(SeqId seq, int64_t n_new);
  // The free blocks reserve(seq, n_new) would take (to check a whole batch before reserving).
  int64_t blocks_needed(SeqId seq, int64_t n_new) const;
  // Records that n tokens (already reserved and written) were appended.
  void advance(SeqId seq, int64_t n);

  int64_t n_past(SeqId seq) const;
  bool is_live(SeqId seq) const;  // a sequence (not a snapshot) that exists now

  // kda_index / mla_index count only layers of that kind (0-based, in layer order).
  KdaSlotView kda(SeqId seq, int64_t kda_index);
  PagedRows mla(SeqId seq, int64_t mla_index) const;
  // Writable row for position t (must be reserved; never a shared block).
  float* mla_row(SeqId seq, int64_t mla_index, int64_t t);

  // Accounting.
  int64_t block_tokens() const;
  int64_t n_blocks() const;  // total
  int64_t free_blocks() const;
  int64_t max_entries() const;
  int64_t free_entries() const;  // slots not held by a sequence or snapshot
  size_t slot_bytes() const;     // one KDA slot
  size_t block_bytes() const;    // one MLA block
  int32_t block_refs(int32_t block) const;
  // The block table of a sequence (for tests of sharing): block ids in position order.
  std::vector<int32_t> block_table(SeqId seq) const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace k3
