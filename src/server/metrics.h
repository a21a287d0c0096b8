// Server counters, gauges and latency histograms, rendered as Prometheus text for /metrics.
// Thread-safe: counters are atomics, histograms take a lock per observation.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace k3::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // "name_bucket{le=...} n" lines, then _sum and _count.
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // one per bound, plus +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

// What the scheduler publishes after each step (read without locking by /metrics).
struct EngineGauges {
  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> running{0};
  std::atomic<int64_t> last_batch_tokens{0};
  std::atomic<int64_t> free_entries{0};
  std::atomic<int64_t> max_entries{0};
  std::atomic<int64_t> free_blocks{0};
  std::atomic<int64_t> total_blocks{0};
  std::atomic<int64_t> cache_entries{0};
  std::atomic<int64_t> cache_bytes{0};
};

struct Metrics {
  Metrics();
  void count_response(int status);  // by HTTP status code
  std::string render() const;

  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> completion_tokens{0};
  std::atomic<int64_t> cache_hit_tokens{0};
  std::atomic<int64_t> requests_cancelled{0};
  std::atomic<int64_t> steps{0};
  EngineGauges gauges;
  Histogram ttft;                        // seconds from submit to the first token
  Histogram itl;                         // seconds between tokens of one request
  Histogram step;                        // seconds per engine step
  std::atomic<int64_t> step_tokens{0};   // tokens run through steps (prompt chunks + decodes)
  std::atomic<int64_t> http_threads{0};  // live HTTP worker threads (the pool grows on demand)

 private:
  mutable std::mutex mu_;
  std::map<int, int64_t> responses_;
};

}  // namespace k3::server
