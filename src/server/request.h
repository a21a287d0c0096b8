// One generation request as the scheduler sees it, and the channel its results travel back on.
// The HTTP thread fills a GenRequest, submits a RequestChannel and reads events from it; the
// scheduler thread pushes one event per sampled token and a final Finish. Either side may end
// it: the scheduler with a finish reason, the HTTP side by cancel() (client gone, stop button).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "k3/sampler.h"

namespace k3::server {

struct GenRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling{};
  LogitBias logit_bias{};
  int64_t max_tokens = -1;  // -1: until a stop or the context is full
  std::vector<std::string> stop{};
  int32_t top_logprobs = -1;  // -1: no logprobs; 0..20: the sampled token's and this many more
  bool use_prefix_cache = true;
  bool json_object = false;  // constrain the answer's content to one JSON object
  bool thinking = false;     // the prompt opened the think channel (json_object lets it run)
};

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0;
};

struct TokenEvent {
  int32_t id = -1;     // -1: held-back text released at the end (no token of its own)
  std::string text{};  // text that is final (after stop strings), may be empty
  TokenLogprob chosen{};
  std::vector<TokenLogprob> top{};
};

struct Finish {
  std::string reason{};  // "stop", "length", "cancelled", "error"
  std::string error{};   // with "error": what went wrong
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens restored from the prefix cache
  int64_t completion_tokens = 0;
};

class RequestChannel {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RequestChannel(GenRequest r) : request(std::move(r)), submitted(Clock::now()) {}

  // Scheduler side.
  void push(TokenEvent e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
  }
  void finish(Finish f) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_) return;
    finish_ = std::move(f);
    cv_.notify_all();
  }
  bool cancelled() const { return cancel_.load(std::memory_order_relaxed); }

  // HTTP side: waits up to `timeout` for events; moves them to `out`. Returns the Finish once
  // every event before it was taken.
  std::optional<Finish> wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !events_.empty() || finish_.has_value(); });
    while (!events_.empty()) {
      out.push_back(std::move(events_.front()));
      events_.pop_front();
    }
    return finish_;
  }
  void cancel() { cancel_.store(true, std::memory_order_relaxed); }

  const GenRequest request;
  const Clock::time_point submitted;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  std::optional<Finish> finish_;
  std::atomic<bool> cancel_{false};
};

}  // namespace k3::server
