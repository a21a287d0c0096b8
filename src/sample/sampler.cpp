#include "k3/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/error.h"

namespace k3 {
namespace {

// Higher probability first; the lower id wins a tie, so the order is total and reproducible.
bool by_p_then_id(const Candidate& a, const Candidate& b) {
  return a.p != b.p ? a.p > b.p : a.id < b.id;
}

bool by_logit_then_id(const Candidate& a, const Candidate& b) {
  return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

void renormalise(std::vector<Candidate>& c) {
  double sum = 0;
  for (const Candidate& x : c) sum += x.p;
  if (sum <= 0) return;
  for (Candidate& x : c) x.p = static_cast<float>(x.p / sum);
}

}  // namespace

void validate(const SamplingParams& p) {
  check(std::isfinite(p.temperature), "sampling: temperature must be a finite number, found ",
        p.temperature);
  check(p.top_k >= 0, "sampling: top_k must be >= 0 (0 = off), found ", p.top_k);
  check(p.top_p > 0 && p.top_p <= 1, "sampling: top_p must be in (0, 1], found ", p.top_p);
  check(p.min_p >= 0 && p.min_p <= 1, "sampling: min_p must be in [0, 1], found ", p.min_p);
  check(p.repeat_penalty > 0 && std::isfinite(p.repeat_penalty),
        "sampling: repeat_penalty must be > 0 (1 = off), found ", p.repeat_penalty);
  check(std::isfinite(p.presence_penalty) && std::isfinite(p.frequency_penalty),
        "sampling: presence and frequency penalties must be finite");
  check(p.penalty_last_n >= -1, "sampling: penalty_last_n must be >= -1 (-1 = whole context)");
}

void validate(const LogitBias& bias) {
  for (auto [id, b] : bias) {
    check(!std::isnan(b) && b != INFINITY, "sampling: logit bias of token ", id,
          " must be a number or -inf, found ", b);
  }
}

void apply_logit_bias(std::span<float> logits, const LogitBias& bias_list) {
  for (auto [id, bias] : bias_list) {
    if (id >= 0 && size_t(id) < logits.size()) logits[size_t(id)] += bias;
  }
}

void apply_penalties(std::span<float> logits, std::span<const int32_t> history,
                     const SamplingParams& p) {
  if (p.repeat_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) {
    return;
  }
  const size_t n =
      p.penalty_last_n < 0 ? history.size() : std::min(history.size(), size_t(p.penalty_last_n));
  std::unordered_map<int32_t, int32_t> count;
  for (int32_t id : history.last(n)) ++count[id];
  for (auto [id, c] : count) {
    if (id < 0 || size_t(id) >= logits.size()) continue;
    float& l = logits[size_t(id)];
    l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= p.presence_penalty * (c > 0 ? 1.0f : 0.0f) + p.frequency_penalty * float(c);
  }
}

int32_t argmax(std::span<const float> logits) {
  check(!logits.empty(), "sampling: empty logits");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

std::vector<Candidate> candidates(std::span<const float> logits, float temperature) {
  std::vector<Candidate> c(logits.size());
  const float inv_t = temperature > 0 ? 1.0f / temperature : 1.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    c[i] = {.id = static_cast<int32_t>(i), .logit = logits[i] * inv_t, .p = 0.0f};
  }
  return c;
}

void softmax(std::vector<Candidate>& c) {
  check(!c.empty(), "sampling: no candidates");
  float mx = -std::numeric_limits<float>::infinity();
  for (const Candidate& x : c) mx = std::max(mx, x.logit);
  check(std::isfinite(mx), "sampling: logits are not finite (max ", mx, ")");
  double sum = 0;
  for (Candidate& x : c) {
    x.p = std::exp(x.logit - mx);
    sum += x.p;
  }
  for (Candidate& x : c) x.p = static_cast<float>(x.p / sum);
}

void top_k_filter(std::vector<Candidate>& c, int32_t k) {
  if (k <= 0 || size_t(k) >= c.size()) {
    std::sort(c.begin(), c.end(), by_logit_then_id);
  } else {
    std::partial_sort(c.begin(), c.begin() + k, c.end(), by_logit_then_id);
    c.resize(size_t(k));
  }
  renormalise(c);
}

void top_p_filter(std::vector<Candidate>& c, float top_p) {
  if (top_p >= 1.0f || c.size() <= 1) return;
  // Sort only as much of the head as the mass needs: the head is usually short.
  for (size_t m = std::min<size_t>(64, c.size());; m = std::min(2 * m, c.size())) {
    if (!std::is_sorted(c.begin(), c.begin() + m, by_p_then_id)) {
      std::partial_sort(c.begin(), c.begin() + m, c.end(), by_p_then_id);
    }
    double cum = 0;
    for (size_t i = 0; i < m; ++i) {
      cum += c[i].p;
      if (cum >= top_p) {
        c.resize(i + 1);
        renormalise(c);
        return;
      }
    }
    if (m == c.size()) return;  // rounding: the whole list is needed
  }
}

void min_p_filter(std::vector<Candidate>& c, float min_p) {
  if (min_p <= 0.0f || c.empty()) return;
  float p_max = 0;
  for (const Candidate& x : c) p_max = std::max(p_max, x.p);
  const float threshold = min_p * p_max;
  std::erase_if(c, [threshold](const Candidate& x) { return x.p < threshold; });
  renormalise(c);
}

int32_t draw(const std::vector<Candidate>& c, double u) {
  check(!c.empty(), "sampling: no candidates to draw from");
  double cum = 0;
  for (const Candidate& x : c) {
    cum += x.p;
    if (u < cum) return x.id;
  }
  return c.back().id;  // u within rounding of 1
}

Sampler::Sampler(const SamplingParams& p, LogitBias bias)
    : params_(p), bias_(std::move(bias)), rng_(p.seed) {
  validate(p);
  validate(bias_);
}

double Sampler::next_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

std::vector<Candidate> Sampler::distribution(std::span<const float> logits,
                                             std::span<const int32_t> history) const {
  std::vector<float> l(logits.begin(), logits.end());
  apply_logit_bias(l, bias_);
  apply_penalties(l, history, params_);
  if (params_.temperature <= 0) return {{.id = argmax(l), .logit = 0.0f, .p = 1.0f}};
  std::vector<Candidate> c = candidates(l, params_.temperature);
  softmax(c);
  if (params_.top_k > 0) top_k_filter(c, params_.top_k);
  top_p_filter(c, params_.top_p);
  min_p_filter(c, params_.min_p);
  return c;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  std::vector<Candidate> c = distribution(logits, history);
  if (params_.temperature <= 0) return c[0].id;  // greedy draws no random number
  return draw(c, next_uniform());
}

}  // namespace k3
