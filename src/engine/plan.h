// The host-side plan of one step: which rows of the step's flat token batch belong to which
// sequence, and where each sequence stands. Layers read it to run per-sequence parts (KDA
// core and conv, MLA attention) while every projection runs once over all rows.
#pragma once

#include <cstdint>

#include "backend/ctx.h"
#include "engine/state_pool.h"

namespace k3 {

struct SeqSpan {
  SeqId seq = -1;
  int64_t t0 = 0;      // first row of this sequence in the step
  int64_t n = 0;       // new tokens
  int64_t n_past = 0;  // tokens already in its state
  // One new token runs the recurrent forms (recurrent KDA, absorbed MLA); more run the
  // parallel ones (chunked KDA from the slot's state; expanded MLA on a fresh sequence,
  // absorbed MLA when there is history, so chunked prefill never re-expands the cache).
  bool recurrent() const { return n == 1; }
  bool mla_expanded() const { return n > 1 && n_past == 0; }
};

struct StepPlan {
  const SeqSpan* seqs = nullptr;
  int64_t n_seqs = 0;
  int64_t T = 0;  // rows in the step (Σ n)
};

// What a layer needs besides its input and weights.
struct LayerCtx {
  const StepPlan& plan;
  StatePool& pool;
  Ctx& ctx;  // backend + workspace; a layer releases its temporaries with an ArenaScope
};

}  // namespace k3
