#include "server/metrics.h"

#include <cstdio>

namespace k3::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++n_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  char line[160];
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    if (i < bounds_.size())
      std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name.c_str(), bounds_[i],
                    static_cast<unsigned long long>(cumulative));
    else
      std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n", name.c_str(),
                    static_cast<unsigned long long>(cumulative));
    out += line;
  }
  std::snprintf(line, sizeof line, "%s_sum %.9g\n%s_count %llu\n", name.c_str(), sum_, name.c_str(),
                static_cast<unsigned long long>(n_));
  out += line;
}

namespace {

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

void add(std::string& out, const char* name, const char* type, const char* help, int64_t v) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
         name + " " + std::to_string(v) + "\n";
}

}  // namespace

Metrics::Metrics() : ttft(latency_buckets()), itl(latency_buckets()), step(latency_buckets()) {}

void Metrics::count_response(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[status];
}

std::string Metrics::render() const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out +=
        "# HELP k3_http_responses_total HTTP responses by status code\n"
        "# TYPE k3_http_responses_total counter\n";
    for (const auto& [code, n] : responses_)
      out += "k3_http_responses_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) +
             "\n";
  }
  add(out, "k3_prompt_tokens_total", "counter", "prompt tokens of finished requests",
      prompt_tokens);
  add(out, "k3_completion_tokens_total", "counter", "generated tokens", completion_tokens);
  add(out, "k3_prefix_cache_hit_tokens_total", "counter",
      "prompt tokens restored from the prefix cache", cache_hit_tokens);
  add(out, "k3_requests_cancelled_total", "counter", "requests cancelled by the client",
      requests_cancelled);
  add(out, "k3_steps_total", "counter", "engine steps run", steps);
  add(out, "k3_step_tokens_total", "counter", "tokens run through engine steps", step_tokens);
  const EngineGauges& g = gauges;
  add(out, "k3_queue_depth", "gauge", "requests waiting for a sequence", g.queue_depth);
  add(out, "k3_running_sequences", "gauge", "requests holding a sequence", g.running);
  add(out, "k3_batch_tokens", "gauge", "tokens in the last step", g.last_batch_tokens);
  add(out, "k3_engine_free_entries", "gauge", "free state-pool entries (sequences + snapshots)",
      g.free_entries);
  add(out, "k3_engine_max_entries", "gauge", "state-pool entries in all", g.max_entries);
  add(out, "k3_engine_free_blocks", "gauge", "free MLA cache blocks", g.free_blocks);
  add(out, "k3_engine_total_blocks", "gauge", "MLA cache blocks in all", g.total_blocks);
  add(out, "k3_prefix_cache_entries", "gauge", "snapshots held by the prefix cache",
      g.cache_entries);
  add(out, "k3_prefix_cache_bytes", "gauge", "prefix cache size (upper bound)", g.cache_bytes);
  add(out, "k3_http_threads", "gauge", "live HTTP worker threads", http_threads);
  ttft.render(out, "k3_time_to_first_token_seconds", "time from request to its first token");
  itl.render(out, "k3_inter_token_latency_seconds", "time between two tokens of a request");
  step.render(out, "k3_step_seconds", "time of one engine step");
  return out;
}

}  // namespace k3::server
