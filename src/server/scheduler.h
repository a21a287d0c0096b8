// The scheduler: one thread that owns the Engine and runs continuous batching. Requests wait in
// a queue and join the running set between steps (up to `parallel` at once). Each step holds
// one decode token of every running request that has a sampled token to feed, then prompt
// chunks of the requests still prefilling, up to `step_tokens` tokens in all, so a long prompt
// is prefilled over several steps interleaved with the others' decodes. Prompt chunks end on
// the prefix cache's snapshot boundaries, where the state is saved for later requests.
//
// Admission: submit() refuses (Admit::full) when the queue already holds `max_queue` requests,
// so the HTTP layer answers 429. A request whose channel is cancelled (client gone) is dropped
// at the next step and its sequence released (its blocks go back to the pool).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "k3/engine.h"
#include "k3/tokenizer.h"
#include "server/json_constraint.h"
#include "server/metrics.h"
#include "server/prefix_cache.h"
#include "server/request.h"

namespace k3::server {

struct SchedulerOptions {
  int64_t parallel = 4;           // requests decoding together
  int64_t max_queue = 64;         // requests waiting beyond those; more are refused
  int64_t n_ctx = 4096;           // per request: prompt + generated tokens
  int64_t step_tokens = 256;      // tokens per step (decodes first, then prompt chunks)
  size_t cache_bytes = 64 << 20;  // prefix cache budget; 0 turns the cache off
  int64_t cache_entries = 256;    // prefix cache entries at most
  int64_t cache_every = 64;       // snapshot boundary in tokens (a multiple of block_tokens)
  int64_t block_tokens = 16;
  int64_t step_delay_ms = 0;  // test knob: a pause after each step (a slow engine)
};

enum class Admit { ok, full, draining };

class Scheduler {
 public:
  Scheduler(const Model& model, const Tokenizer& tokenizer, SchedulerOptions opt, Metrics& metrics);
  ~Scheduler();  // cancels what is left and joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  Admit submit(std::shared_ptr<RequestChannel> request);
  void drain();       // refuse new requests from now on
  void cancel_all();  // cancel queued and running requests
  bool idle() const;  // nothing queued or running
  const SchedulerOptions& options() const { return opt_; }
  int64_t vocab() const { return n_vocab_; }

 private:
  struct Active;
  void loop();
  void admit_waiting();
  void drop_cancelled();
  bool build_batch();
  void run_step();
  void sample(Active& a, const float* logits);
  int32_t sample_json(Active& a, std::span<const float> logits);  // -1: no id allowed
  void end(Active& a, Finish f);
  void publish_gauges();

  const Tokenizer tokenizer_;
  SchedulerOptions opt_;
  Metrics& metrics_;
  Engine engine_;
  PrefixCache cache_;
  int64_t n_vocab_;
  int64_t total_blocks_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<RequestChannel>> waiting_;        // guarded by mu_
  bool stop_ = false, draining_ = false, cancel_all_ = false;  // guarded by mu_
  bool idle_ = true;  // guarded by mu_; set by the scheduler thread after each round
  std::atomic<int64_t> n_running_{0};

  // Scheduler thread only.
  std::vector<std::unique_ptr<Active>> running_;
  Batch batch_;
  std::vector<Active*> batch_members_;  // per batch sequence
  std::vector<int64_t> batch_new_;      // prompt tokens each member feeds this step (0: decode)
  std::vector<int64_t> chunk_;          // one prompt chunk as engine ids
  // [logit rows, model vocab]: the engine's own buffer (Engine::step_view, pinned host memory on
  // a device: no copy), valid until the next step.
  std::span<const float> logits_;
  std::unique_ptr<JsonTokens> json_tokens_;  // built for the first json_object request
  std::vector<float> masked_;                // [n_vocab] one row, json_object's mask applied
  std::thread thread_;
};

}  // namespace k3::server
