// The engine: many sequences, one batched step. Each sequence's state (KDA conv + recurrent
// state in a fixed slot, MLA latents in a paged, reference-counted block cache) lives in one
// pool created with a memory budget. A step runs any mix of prompt chunks and single decode
// tokens from different sequences together: every weight is read once per step.
//
//   k3::Engine engine(*model, {.state_budget_bytes = 1 << 30, .max_sequences = 8});
//   k3::SeqId a = engine.create_sequence(), b = engine.create_sequence();
//   k3::Batch batch;
//   batch.add(a, prompt_a);            // a prompt chunk: logits for its last row
//   batch.add(b, {next_b});            // one decode token
//   std::vector<float> logits = engine.step(batch);   // [2, vocab]
//   k3::SnapshotId snap = engine.snapshot(a);         // save a's state at its length
//   k3::SeqId c = engine.restore(snap);               // a new sequence continuing from it
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "k3/model.h"

namespace k3 {

using SeqId = int64_t;       // a live sequence
using SnapshotId = int64_t;  // a saved sequence state: restored or dropped, never stepped

struct EngineOptions {
  size_t state_budget_bytes = size_t{1} << 30;  // KDA slots + paged MLA latent cache
  int64_t max_sequences = 8;                    // live sequences + snapshots at once
  int64_t block_tokens = 16;                    // tokens per MLA cache block
  // Where the step runs: "cpu" or "cuda" (weights uploaded once, state in device memory).
  // Empty: k3::default_device() (k3/device.h: the CLI's --device, else K3_DEVICE, else "cpu").
  std::string device = {};
  // On a GPU, decode steps (one new token a sequence) run as CUDA graphs (launch overhead gone);
  // false launches their kernels one by one. K3_CUDA_GRAPH=0 or =1 in the environment overrides.
  bool cuda_graphs = true;
};

// The new tokens of one step, flattened (cu_seqlens style): sequence i owns
// tokens[cu_seqlens[i] … cu_seqlens[i+1]). logit_rows lists the rows (indices into tokens)
// whose logits the step returns, in that order.
struct Batch {
  std::vector<int64_t> tokens;
  std::vector<int32_t> cu_seqlens{0};
  std::vector<SeqId> seqs;
  std::vector<int32_t> logit_rows;

  enum class Logits { last, all, none };
  // Appends a sequence's new tokens; by default asks for the logits of its last token.
  void add(SeqId seq, std::span<const int64_t> new_tokens, Logits want = Logits::last);
  void clear();  // keeps capacity, so a reused Batch does not allocate
  int64_t n_seqs() const { return static_cast<int64_t>(seqs.size()); }
};

class Engine {
 public:
  explicit Engine(const Model& model, EngineOptions opt = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  SeqId create_sequence();
  void release(SeqId seq);
  void reset(SeqId seq);  // back to an empty sequence (also clears needs_reset)
  int64_t n_past(SeqId seq) const;

  SnapshotId snapshot(SeqId seq);  // the sequence's state now (one slot; blocks shared)
  SeqId restore(SnapshotId snap);  // a new sequence continuing from the snapshot
  void drop(SnapshotId snap);

  // Runs one step and writes logits [batch.logit_rows.size(), vocab]. Throws k3::Error
  // (naming the sequence or row at fault) before touching any state when the batch is
  // invalid or the pool has no room for it.
  void step(const Batch& batch, float* logits);
  std::vector<float> step(const Batch& batch);
  // The same, the logits left in a buffer the engine owns and reuses (pinned host memory on a
  // device, so the device copies straight into it and nothing copies them again); valid until
  // the next step or the engine goes. A 64-sequence step has 42 MB of logits: a fresh vector
  // each step (step(batch)) cost more host time than the step's kernels.
  std::span<const float> step_view(const Batch& batch);

  // Cancellation (e.g. Ctrl-C during a long prompt chunk): while *flag is true, step() throws
  // k3::Cancelled instead of finishing. The flag is polled before the step and between layers,
  // so a step stops within about one layer's time; nullptr (the default) turns polling off.
  // The flag is only read (any thread or a signal handler may set it); it must outlive its use.
  // A step cancelled before its first layer changes nothing. One cancelled between layers has
  // written some layers' KDA state / MLA latent rows but not the others: its sequences are not
  // advanced and are left inconsistent, so they are marked needs_reset, and step() and
  // snapshot() refuse them (k3::Error) until reset() or release(). Snapshots taken earlier
  // are unaffected: restore() one to continue from a consistent state.
  void set_cancel_flag(const std::atomic<bool>* flag);
  bool needs_reset(SeqId seq) const;

  // The budget that holds `sequences` sequences of up to `tokens` tokens each (no snapshots).
  static size_t budget_for(const Model& model, int64_t sequences, int64_t tokens,
                           int64_t block_tokens = 16);

  const Model& model() const { return model_; }
  size_t state_bytes(SeqId seq) const;  // slot + blocks held by the sequence
  int64_t free_sequences() const;       // entries left for sequences or snapshots
  int64_t free_blocks() const;

 private:
  void run_step(const Batch& batch, float* logits);
  struct Impl;
  const Model& model_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3
