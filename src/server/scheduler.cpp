#include "server/scheduler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "k3/error.h"
#include "sample/stop_strings.h"

namespace k3::server {

using Clock = std::chrono::steady_clock;

struct Scheduler::Active {
  Active(std::shared_ptr<RequestChannel> c, const Tokenizer& tok, int64_t n_ctx)
      : ch(std::move(c)),
        history(ch->request.prompt),
        sampler(ch->request.sampling, ch->request.logit_bias),
        decoder(tok),
        stops(ch->request.stop) {
    const int64_t room = n_ctx - prompt_size();
    limit = ch->request.max_tokens >= 0 ? std::min(ch->request.max_tokens, room) : room;
  }
  const std::vector<int32_t>& prompt() const { return ch->request.prompt; }
  int64_t prompt_size() const { return static_cast<int64_t>(ch->request.prompt.size()); }
  bool prefilling() const { return fed < prompt_size(); }

  std::shared_ptr<RequestChannel> ch;
  SeqId seq = -1;
  int64_t fed = 0;               // prompt ids in the state
  int64_t cached = 0;            // of which restored from the prefix cache
  std::vector<int32_t> history;  // prompt + sampled ids (the penalties' context)
  Sampler sampler;
  StreamDecoder decoder;
  StopStrings stops;
  int64_t limit = 0;  // tokens to sample at most
  int64_t generated = 0;
  int32_t pending = -1;  // sampled, to be fed in the next step
  Clock::time_point last_token{};
  bool done = false;
  std::optional<JsonConstraint> json_format;  // response_format json_object
};

namespace {

size_t engine_budget(const Model& m, const SchedulerOptions& o) {
  // Live sequences get n_ctx plus one block each (a copy-on-write tail); the cache gets its
  // entries' slots and its byte budget.
  size_t b = Engine::budget_for(m, o.parallel, o.n_ctx + o.block_tokens, o.block_tokens);
  if (o.cache_bytes > 0 && o.cache_entries > 0)
    b += Engine::budget_for(m, o.cache_entries, 0, o.block_tokens) + o.cache_bytes;
  return b;
}

int64_t engine_entries(const SchedulerOptions& o) {
  return o.parallel + (o.cache_bytes > 0 ? o.cache_entries : 0);
}

SchedulerOptions checked(SchedulerOptions o, const Model& m) {
  check(o.parallel >= 1, "--parallel must be at least 1, got ", o.parallel);
  check(o.max_queue >= 0, "the queue limit must not be negative, got ", o.max_queue);
  check(o.n_ctx >= 2 && o.n_ctx <= m.max_positions(), "the context ", o.n_ctx,
        " must be within [2, ", m.max_positions(), "] (the model's max_position_embeddings)");
  check(o.step_tokens >= 1, "the step token budget must be at least 1, got ", o.step_tokens);
  check(o.step_delay_ms >= 0 && o.step_delay_ms <= 10000,
        "the test step delay must be within [0, 10000] ms, got ", o.step_delay_ms);
  if (o.cache_bytes == 0) o.cache_entries = 0;
  return o;
}

// log-softmax of the chosen id and the `n` most likely ids (ties: lower id first).
void fill_logprobs(std::span<const float> l, int32_t id, int32_t n, TokenEvent& ev) {
  const float mx = *std::max_element(l.begin(), l.end());
  double sum = 0;
  for (float v : l) sum += std::exp(static_cast<double>(v - mx));
  const double lse = mx + std::log(sum);
  ev.chosen = {id, static_cast<float>(l[id] - lse)};
  if (n <= 0) return;
  std::vector<int32_t> idx(l.size());
  std::iota(idx.begin(), idx.end(), 0);
  const auto k = std::min<size_t>(static_cast<size_t>(n), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  for (size_t i = 0; i < k; ++i) ev.top.push_back({idx[i], static_cast<float>(l[idx[i]] - lse)});
}

}  // namespace

Scheduler::Scheduler(const Model& model, const Tokenizer& tokenizer, SchedulerOptions opt,
                     Metrics& metrics)
    : tokenizer_(tokenizer),
      opt_(checked(opt, model)),
      metrics_(metrics),
      engine_(model, {.state_budget_bytes = engine_budget(model, opt_),
                      .max_sequences = engine_entries(opt_),
                      .block_tokens = opt_.block_tokens}),
      cache_(engine_, layout_of(engine_, opt_.block_tokens, opt_.cache_every), opt_.cache_bytes,
             opt_.cache_entries),
      n_vocab_(std::min<int64_t>(tokenizer.n_vocab(), model.vocab_size())) {
  total_blocks_ = engine_.free_blocks();
  metrics_.gauges.max_entries = engine_entries(opt_);
  publish_gauges();
  // OpenMP's thread count is per thread: give the scheduler the one set where it was made.
  const int threads = num_threads();
  thread_ = std::thread([this, threads] {
    set_num_threads(threads);
    loop();
  });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Admit Scheduler::submit(std::shared_ptr<RequestChannel> request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_ || stop_) return Admit::draining;
  const int64_t free_now = opt_.parallel - n_running_.load();
  if (static_cast<int64_t>(waiting_.size()) >= opt_.max_queue + std::max<int64_t>(free_now, 0))
    return Admit::full;
  waiting_.push_back(std::move(request));
  idle_ = false;
  metrics_.gauges.queue_depth = static_cast<int64_t>(waiting_.size());
  cv_.notify_all();
  return Admit::ok;
}

void Scheduler::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
}

void Scheduler::cancel_all() {
  std::lock_guard<std::mutex> lock(mu_);
  cancel_all_ = true;
  cv_.notify_all();
}

bool Scheduler::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_;
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock,
               [&] { return stop_ || cancel_all_ || !waiting_.empty() || !running_.empty(); });
      if (stop_ || cancel_all_) {
        for (auto& w : waiting_) w->cancel();
        for (auto& a : running_) a->ch->cancel();
      }
      cancel_all_ = false;
      if (stop_ && waiting_.empty() && running_.empty()) break;
    }
    drop_cancelled();
    admit_waiting();
    if (build_batch()) {
      run_step();
      if (opt_.step_delay_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(opt_.step_delay_ms));
    }
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [](const std::unique_ptr<Active>& a) { return a->done; }),
                   running_.end());
    publish_gauges();  // before idle() can see the change
    n_running_ = static_cast<int64_t>(running_.size());
    std::lock_guard<std::mutex> lock(mu_);
    idle_ = waiting_.empty() && running_.empty();
  }
  cache_.clear();
}

void Scheduler::drop_cancelled() {
  std::vector<std::shared_ptr<RequestChannel>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto keep = std::stable_partition(waiting_.begin(), waiting_.end(),
                                      [](const auto& w) { return !w->cancelled(); });
    gone.assign(keep, waiting_.end());
    waiting_.erase(keep, waiting_.end());
  }
  for (auto& w : gone) {
    ++metrics_.requests_cancelled;
    w->finish(
        {.reason = "cancelled", .prompt_tokens = static_cast<int64_t>(w->request.prompt.size())});
  }
  for (auto& a : running_) {
    if (!a->done && a->ch->cancelled()) {
      ++metrics_.requests_cancelled;
      end(*a, {.reason = "cancelled"});
    }
  }
}

void Scheduler::admit_waiting() {
  bool admitted = false;
  while (static_cast<int64_t>(running_.size()) < opt_.parallel) {
    std::shared_ptr<RequestChannel> ch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (waiting_.empty()) break;
      ch = std::move(waiting_.front());
      waiting_.pop_front();
      // Counted as running in the same critical section: submit() must never see a request
      // that is neither waiting nor running (it would admit one too many).
      n_running_ = static_cast<int64_t>(running_.size()) + 1;
    }
    auto a = std::make_unique<Active>(std::move(ch), tokenizer_, opt_.n_ctx);
    const GenRequest& r = a->ch->request;
    if (r.prompt.empty() || a->prompt_size() >= opt_.n_ctx) {
      a->ch->finish({.reason = "error", .error = "the prompt does not fit the context"});
      continue;
    }
    try {
      if (r.json_object) {  // before the sequence: a throw here leaves nothing to release
        if (!json_tokens_) json_tokens_ = std::make_unique<JsonTokens>(tokenizer_, n_vocab_);
        a->json_format.emplace(*json_tokens_, r.thinking);
      }
      CacheHit hit;
      if (r.use_prefix_cache) {
        hit = cache_.start(r.prompt);
      } else {
        if (engine_.free_sequences() == 0) cache_.evict_one();
        hit.seq = engine_.create_sequence();
      }
      a->seq = hit.seq;
      a->fed = a->cached = hit.n_tokens;
      metrics_.cache_hit_tokens += hit.n_tokens;
    } catch (const Error& e) {
      a->ch->finish({.reason = "error", .error = e.what()});
      continue;
    }
    running_.push_back(std::move(a));
    admitted = true;
  }
  n_running_ = static_cast<int64_t>(running_.size());  // drops the ones that did not start
  // The gauges count an admitted request at once, not after its first step: /metrics read
  // while that step streams its first tokens must not still say it is not running.
  if (admitted) publish_gauges();
}

bool Scheduler::build_batch() {
  batch_.clear();
  batch_members_.clear();
  batch_new_.clear();
  int64_t budget = opt_.step_tokens;
  int64_t need_blocks = 0;
  const int64_t bt = opt_.block_tokens;
  auto blocks_for = [&](const Active& a, int64_t n) {
    const int64_t past = engine_.n_past(a.seq);
    return (past + n + bt - 1) / bt - past / bt;  // upper bound (counts a copied tail)
  };
  for (auto& a : running_) {
    if (a->done || a->prefilling() || a->pending < 0) continue;
    const int64_t tok = a->pending;
    batch_.add(a->seq, std::span<const int64_t>(&tok, 1));
    batch_members_.push_back(a.get());
    batch_new_.push_back(0);
    need_blocks += blocks_for(*a, 1);
    --budget;
  }
  for (auto& a : running_) {
    if (a->done || !a->prefilling() || budget <= 0) continue;
    int64_t n = std::min(a->prompt_size() - a->fed, budget);
    if (cache_.enabled() && a->ch->request.use_prefix_cache) {
      const int64_t boundary = (a->fed / opt_.cache_every + 1) * opt_.cache_every;
      if (boundary < a->prompt_size()) n = std::min(n, boundary - a->fed);
    }
    chunk_.assign(a->prompt().begin() + a->fed, a->prompt().begin() + a->fed + n);
    const bool last = a->fed + n == a->prompt_size();
    batch_.add(a->seq, chunk_, last ? Batch::Logits::last : Batch::Logits::none);
    batch_members_.push_back(a.get());
    batch_new_.push_back(n);
    need_blocks += blocks_for(*a, n);
    budget -= n;
  }
  while (need_blocks > engine_.free_blocks() && cache_.evict_one()) {
  }
  return !batch_members_.empty();
}

void Scheduler::run_step() {
  metrics_.gauges.last_batch_tokens = static_cast<int64_t>(batch_.tokens.size());
  const auto t0 = Clock::now();
  try {
    logits_ = engine_.step_view(batch_);
  } catch (const Error& e) {
    // Admission keeps every step within the pool; reaching this is a bug, not a client error.
    for (Active* a : batch_members_) end(*a, {.reason = "error", .error = e.what()});
    return;
  }
  ++metrics_.steps;
  metrics_.step_tokens += static_cast<int64_t>(batch_.tokens.size());
  metrics_.step.observe(std::chrono::duration<double>(Clock::now() - t0).count());
  size_t row = 0;
  const size_t V = static_cast<size_t>(engine_.model().vocab_size());
  for (size_t i = 0; i < batch_members_.size(); ++i) {
    Active& a = *batch_members_[i];
    if (batch_new_[i] > 0) {
      a.fed += batch_new_[i];
      if (cache_.enabled() && a.ch->request.use_prefix_cache && a.fed % opt_.cache_every == 0)
        cache_.insert(std::span(a.prompt()).subspan(0, a.fed), a.seq, cache_.layout());
      if (a.prefilling()) continue;
    }
    sample(a, logits_.data() + row * V);
    ++row;
  }
}

int32_t Scheduler::sample_json(Active& a, std::span<const float> logits) {
  masked_.assign(logits.begin(), logits.end());
  if (!a.json_format->mask(masked_, a.limit - a.generated)) return -1;
  int32_t id = a.sampler.sample(masked_, a.history);
  if (std::isinf(masked_[id])) id = argmax(masked_);  // a draw within rounding of 1, or bias
  a.json_format->accept(id);
  return id;
}

void Scheduler::sample(Active& a, const float* logits) {
  const std::span<const float> l(logits, static_cast<size_t>(n_vocab_));
  const int32_t id = a.json_format ? sample_json(a, l) : a.sampler.sample(l, a.history);
  if (id < 0) {
    end(a, {.reason = "error", .error = "response_format: no token can continue the JSON"});
    return;
  }
  const auto now = Clock::now();
  if (a.generated == 0)
    metrics_.ttft.observe(std::chrono::duration<double>(now - a.ch->submitted).count());
  else
    metrics_.itl.observe(std::chrono::duration<double>(now - a.last_token).count());
  a.last_token = now;
  ++a.generated;
  ++metrics_.completion_tokens;
  const std::vector<int32_t> stop_ids = tokenizer_.stop_ids();
  TokenEvent ev;
  auto flush = [&] {
    std::string tail = a.stops.push(a.decoder.finish());
    if (!a.stops.matched()) tail += a.stops.finish();
    return tail;
  };
  if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) {
    ev.text = flush();
    if (!ev.text.empty()) a.ch->push(std::move(ev));
    end(a, {.reason = "stop"});
    return;
  }
  ev.id = id;
  if (a.ch->request.top_logprobs >= 0) fill_logprobs(l, id, a.ch->request.top_logprobs, ev);
  ev.text = a.stops.push(a.decoder.push(id));
  if (a.stops.matched()) {
    a.ch->push(std::move(ev));
    end(a, {.reason = "stop"});
  } else if (a.generated >= a.limit) {
    ev.text += flush();
    a.ch->push(std::move(ev));
    end(a, {.reason = "length"});
  } else {
    a.ch->push(std::move(ev));
    a.pending = id;
    a.history.push_back(id);
  }
}

void Scheduler::end(Active& a, Finish f) {
  if (a.done) return;
  a.done = true;
  if (a.seq >= 0) engine_.release(a.seq);
  a.seq = -1;
  f.prompt_tokens = a.prompt_size();
  f.cached_tokens = a.cached;
  f.completion_tokens = a.generated;
  metrics_.prompt_tokens += a.prompt_size();
  a.ch->finish(std::move(f));
}

void Scheduler::publish_gauges() {
  EngineGauges& g = metrics_.gauges;
  {
    std::lock_guard<std::mutex> lock(mu_);
    g.queue_depth = static_cast<int64_t>(waiting_.size());
  }
  g.running = static_cast<int64_t>(running_.size());
  g.free_entries = engine_.free_sequences();
  g.free_blocks = engine_.free_blocks();
  g.total_blocks = total_blocks_;
  g.cache_entries = cache_.entries();
  g.cache_bytes = static_cast<int64_t>(cache_.bytes());
}

}  // namespace k3::server
