// k3::Engine: validates a batch, plans it, reserves cache blocks, runs the forward step and
// advances the sequences. Steady-state steps allocate nothing: the plan, the step tensors
// (arena) and the pool are all reused. A cancel flag is polled before the step and between
// layers; sequences of a step cancelled mid-way are marked needs_reset (see engine.h).
#include "k3/engine.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/cuda.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/fp_env.h"
#include "core/parallel.h"
#include "engine/plan.h"
#include "engine/state_pool.h"
#include "k3/device.h"
#include "model/forward.h"
#include "model/weights_resident.h"

namespace k3 {

void Batch::add(SeqId seq, std::span<const int64_t> new_tokens, Logits want) {
  const int32_t t0 = cu_seqlens.back();
  tokens.insert(tokens.end(), new_tokens.begin(), new_tokens.end());
  cu_seqlens.push_back(static_cast<int32_t>(tokens.size()));
  seqs.push_back(seq);
  const int32_t t1 = cu_seqlens.back();
  if (want == Logits::all) {
    for (int32_t r = t0; r < t1; ++r) logit_rows.push_back(r);
  } else if (want == Logits::last && t1 > t0) {
    logit_rows.push_back(t1 - 1);
  }
}

void Batch::clear() {
  tokens.clear();
  cu_seqlens.assign(1, 0);
  seqs.clear();
  logit_rows.clear();
}

namespace {

Backend& engine_backend(const EngineOptions& o) {
  const std::string name = o.device.empty() ? default_device() : o.device;
  return backend_named(name.c_str());
}

// The step arena in the backend's memory.
ArenaMemory memory_of(Backend& b) {
  if (b.device() == Device::cpu) return {};
  return {[](size_t n, void* u) { return static_cast<Backend*>(u)->alloc(n); },
          [](void* p, void* u) { static_cast<Backend*>(u)->free(p); }, &b};
}

// K3_CUDA_GRAPH=0 / =1 overrides EngineOptions::cuda_graphs.
bool graphs_wanted(bool option) {
  const char* v = std::getenv("K3_CUDA_GRAPH");
  if (v == nullptr || *v == 0) return option;
  return std::string_view(v) != "0";
}

StatePoolOptions pool_options(const EngineOptions& o, Backend& b) {
  StatePoolOptions p{o.state_budget_bytes, o.max_sequences, o.block_tokens, nullptr};
  if (b.device() != Device::cpu) {
    p.device = &b;
    // Device state is committed at once: at most half of the free device memory.
    p.budget_bytes = std::min(p.budget_bytes, cuda_free_bytes() / 2);
  }
  return p;
}

}  // namespace

struct Engine::Impl {
  const Model& model;
  Backend& backend;
  StatePool pool;
  Arena host_arena;
  Arena arena;
  std::vector<SeqSpan> plan;  // capacity max_sequences: planning never allocates
  const std::atomic<bool>* cancel = nullptr;
  bool graphs;                // decode steps as CUDA graphs
  std::vector<SeqId> broken;  // needs_reset sequences; capacity max_sequences
  // The step's logits on the host: backend.alloc_host memory (pinned on a device), grown on
  // demand and kept.
  float* logits = nullptr;
  size_t logits_cap = 0;  // floats

  float* logits_for(size_t n) {
    if (n > logits_cap) {
      backend.free_host(logits);
      logits = nullptr;
      logits_cap = 0;
      logits = static_cast<float*>(backend.alloc_host(n * sizeof(float)));
      logits_cap = n;
    }
    return logits;
  }

  Impl(const Model& model_, const EngineOptions& o, Backend& b)
      : model(model_),
        backend(b),
        pool(model_.hparams(), pool_options(o, b)),
        host_arena(b.device() == Device::cpu ? 0 : size_t{1} << 20),
        arena(size_t{1} << 20, memory_of(b)),
        graphs(b.device() == Device::cuda && graphs_wanted(o.cuda_graphs)) {
    plan.reserve(static_cast<size_t>(o.max_sequences));
    broken.reserve(static_cast<size_t>(o.max_sequences));
    if (b.device() != Device::cpu) make_weights_resident(model.weights());
  }
  ~Impl() {
    if (graphs) cuda_drop_graphs();  // they hold this engine's buffers
    backend.free_host(logits);
    if (backend.device() != Device::cpu) release_weights_resident(model.weights());
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  bool is_broken(SeqId s) const {
    return std::find(broken.begin(), broken.end(), s) != broken.end();
  }
  void unbreak(SeqId s) {
    broken.erase(std::remove(broken.begin(), broken.end(), s), broken.end());
  }
};

namespace {

// Checks the batch's shape, its sequences and tokens; names the first problem found.
void validate(const Batch& b, const StatePool& pool, const std::vector<SeqId>& broken,
              int64_t vocab) {
  const int64_t B = b.n_seqs(), T = static_cast<int64_t>(b.tokens.size());
  check(B >= 1, "batch: no sequences");
  check(static_cast<int64_t>(b.cu_seqlens.size()) == B + 1 && b.cu_seqlens[0] == 0 &&
            b.cu_seqlens[B] == T,
        "batch: cu_seqlens must have ", B + 1, " entries from 0 to ", T);
  for (int64_t i = 0; i < B; ++i) {
    const SeqId s = b.seqs[i];
    check(b.cu_seqlens[i + 1] > b.cu_seqlens[i], "batch: sequence ", s, " has no new tokens");
    check(pool.is_live(s), "batch: sequence ", s, " does not exist (released, or a snapshot id)");
    check(std::find(broken.begin(), broken.end(), s) == broken.end(), "batch: sequence ", s,
          " holds partial state from a cancelled step; reset() or release() it first");
    for (int64_t j = 0; j < i; ++j)
      check(b.seqs[j] != s, "batch: sequence ", s, " appears twice in one step");
  }
  for (int64_t t = 0; t < T; ++t) {
    check(b.tokens[t] >= 0 && b.tokens[t] < vocab, "batch: token id ", b.tokens[t], " at row ", t,
          " is outside the vocabulary [0, ", vocab, ")");
  }
  for (int32_t r : b.logit_rows)
    check(r >= 0 && r < T, "batch: logit row ", r, " is outside the step's ", T, " rows");
}

}  // namespace

Engine::Engine(const Model& model, EngineOptions opt)
    : model_(model), impl_(std::make_unique<Impl>(model, opt, engine_backend(opt))) {}
Engine::~Engine() = default;

SeqId Engine::create_sequence() { return impl_->pool.create(); }
void Engine::release(SeqId seq) {
  impl_->pool.release(seq);
  impl_->unbreak(seq);
}
void Engine::reset(SeqId seq) {
  impl_->pool.reset(seq);
  impl_->unbreak(seq);
}
int64_t Engine::n_past(SeqId seq) const { return impl_->pool.n_past(seq); }
SnapshotId Engine::snapshot(SeqId seq) {
  check(!impl_->is_broken(seq), "snapshot: sequence ", seq,
        " holds partial state from a cancelled step; reset() or release() it first");
  return impl_->pool.snapshot(seq);
}
void Engine::set_cancel_flag(const std::atomic<bool>* flag) { impl_->cancel = flag; }
bool Engine::needs_reset(SeqId seq) const { return impl_->is_broken(seq); }
SeqId Engine::restore(SnapshotId snap) { return impl_->pool.restore(snap); }
void Engine::drop(SnapshotId snap) { impl_->pool.drop(snap); }
int64_t Engine::free_sequences() const { return impl_->pool.free_entries(); }
int64_t Engine::free_blocks() const { return impl_->pool.free_blocks(); }

size_t Engine::budget_for(const Model& model, int64_t sequences, int64_t tokens,
                          int64_t block_tokens) {
  const HParams& hp = model.hparams();
  const int64_t P = hp.kda.proj_dim(), W = hp.kda.conv_kernel, K = hp.kda.head_dim;
  const size_t slot = static_cast<size_t>(hp.n_layers_of(AttnKind::kda)) *
                      static_cast<size_t>(3 * P * (W - 1) + hp.kda.n_head * K * K) * 4;
  const size_t block =
      static_cast<size_t>(hp.n_layers_of(AttnKind::mla) * block_tokens * hp.mla.cache_width()) * 4;
  const size_t blocks = static_cast<size_t>((tokens + block_tokens - 1) / block_tokens);
  return static_cast<size_t>(sequences) * (slot + blocks * block) + 1;
}

size_t Engine::state_bytes(SeqId seq) const {
  const StatePool& p = impl_->pool;
  const int64_t bt = p.block_tokens();
  const int64_t blocks = (p.n_past(seq) + bt - 1) / bt;
  return p.slot_bytes() + static_cast<size_t>(blocks) * p.block_bytes();
}

namespace {

// dst = src over n floats, in pieces over the worker threads (42 MB of logits at 64 sequences).
void copy_floats(float* dst, const float* src, size_t n) {
  constexpr size_t kPiece = size_t{1} << 18;  // 1 MB
  const int64_t pieces = static_cast<int64_t>((n + kPiece - 1) / kPiece);
  parallel_for(pieces, pieces > 1, [&](int64_t i) {
    const size_t at = static_cast<size_t>(i) * kPiece;
    std::copy_n(src + at, std::min(kPiece, n - at), dst + at);
  });
}

// Decode steps (one new token a sequence) run as CUDA graphs when the engine's are on.
bool graphed(bool graphs, const std::vector<SeqSpan>& plan) {
  return graphs && std::all_of(plan.begin(), plan.end(), [](const SeqSpan& s) { return s.n == 1; });
}

}  // namespace

void Engine::step(const Batch& b, float* logits) {
  if (impl_->backend.device() == Device::cpu) {
    run_step(b, logits);
    return;
  }
  // On a device the copy lands in pinned memory first (a pageable destination goes through the
  // driver's staging buffers), then goes to the caller's buffer: measured 0.2–0.8 ms faster at
  // 64 sequences (bench/RESULTS.md); step_view skips the second copy.
  const std::span<const float> out = step_view(b);
  copy_floats(logits, out.data(), out.size());
}

std::span<const float> Engine::step_view(const Batch& b) {
  validate(b, impl_->pool, impl_->broken, model_.vocab_size());  // before sizing the buffer
  const size_t n = b.logit_rows.size() * static_cast<size_t>(model_.vocab_size());
  float* buf = impl_->logits_for(n);
  run_step(b, buf);
  return {buf, n};
}

void Engine::run_step(const Batch& b, float* logits) {
  StatePool& pool = impl_->pool;
  validate(b, pool, impl_->broken, model_.vocab_size());
  const std::atomic<bool>* cancel = impl_->cancel;
  if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) throw Cancelled();
  const int64_t B = b.n_seqs();
  // The whole batch must fit before any sequence reserves, so a refused step changes nothing.
  int64_t need = 0;
  for (int64_t i = 0; i < B; ++i)
    need += pool.blocks_needed(b.seqs[i], b.cu_seqlens[i + 1] - b.cu_seqlens[i]);
  check(need <= pool.free_blocks(), "batch: needs ", need, " free MLA cache blocks of ",
        pool.block_tokens(), " tokens, ", pool.free_blocks(), " of ", pool.n_blocks(),
        " are free; release sequences or snapshots, or raise the state budget");
  for (int64_t i = 0; i < B; ++i) pool.reserve(b.seqs[i], b.cu_seqlens[i + 1] - b.cu_seqlens[i]);
  std::vector<SeqSpan>& plan = impl_->plan;
  plan.clear();
  for (int64_t i = 0; i < B; ++i) {
    const int64_t t0 = b.cu_seqlens[i];
    plan.push_back({b.seqs[i], t0, b.cu_seqlens[i + 1] - t0, pool.n_past(b.seqs[i])});
  }
  const StepPlan sp{plan.data(), B, static_cast<int64_t>(b.tokens.size())};
  impl_->arena.reset();
  impl_->host_arena.reset();
  const bool on_host = impl_->backend.device() == Device::cpu;
  Ctx ctx{impl_->backend, impl_->arena, nullptr, on_host ? nullptr : &impl_->host_arena};
  const StepIO io{b.tokens.data(), b.logit_rows.data(), static_cast<int64_t>(b.logit_rows.size()),
                  logits, cancel};
  const FlushSubnormals flush;  // core/fp_env.h: subnormal gates cost Intel cores ~100x
  try {
    if (graphed(impl_->graphs, plan)) {
      // Keyed by the engine and the step's shape; the dry run compares everything else (cuda.h).
      const uint64_t key = (reinterpret_cast<uintptr_t>(impl_.get()) * 0x9e3779b97f4a7c15ull) ^
                           (static_cast<uint64_t>(B) | static_cast<uint64_t>(io.n_logits) << 32);
      cuda_run_graphed(
          key, [&] { forward_step(model_.weights(), model_.hparams(), sp, pool, ctx, io); });
    } else {
      forward_step(model_.weights(), model_.hparams(), sp, pool, ctx, io);
    }
  } catch (const Cancelled&) {
    // Some layers hold the step's tokens, others not: no way back but a reset.
    for (const SeqSpan& s : plan) {
      if (!impl_->is_broken(s.seq)) impl_->broken.push_back(s.seq);
    }
    throw;
  }
  for (const SeqSpan& s : plan) pool.advance(s.seq, s.n);
}

std::vector<float> Engine::step(const Batch& b) {
  std::vector<float> logits(b.logit_rows.size() * static_cast<size_t>(model_.vocab_size()));
  step(b, logits.data());
  return logits;
}

}  // namespace k3
