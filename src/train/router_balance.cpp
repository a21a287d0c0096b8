#include "k3/router_balance.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "core/parallel.h"
#include "k3/error.h"

namespace k3::balance {
namespace {

size_t at(int64_t i) { return static_cast<size_t>(i); }

// Threads only pay off on simulation-sized batches; the hand-made examples stay serial.
bool parallel(const Scores& sc) { return sc.tokens * sc.experts >= (int64_t{1} << 18); }

void check_args(const Scores& sc, int64_t k, const std::vector<double>& bias) {
  check(k >= 1 && k < sc.experts, "QB: top-k (", k, ") must be in 1..N-1 (N = ", sc.experts, ")");
  check(static_cast<int64_t>(bias.size()) == sc.experts, "QB: bias has ", bias.size(),
        " entries, expected ", sc.experts);
}

// The k+1 best experts of one token by biased score v, best first: best[0..k) are selected and
// best[k] is the (k+1)-th. Ties go to the lower expert index, so the result is deterministic.
// Insertion into a short sorted list: most experts are rejected by one comparison.
struct Ranked {
  double v;
  int64_t e;
};
void top_k_plus_one(const std::vector<double>& v, int64_t k, std::vector<Ranked>& best) {
  best.clear();
  const size_t keep = at(k + 1);
  for (int64_t e = 0; e < static_cast<int64_t>(v.size()); ++e) {
    const double x = v[at(e)];
    if (best.size() == keep && !(x > best.back().v)) continue;  // equal: the lower index stays
    if (best.size() < keep) best.push_back({x, e});
    size_t i = best.size() - 1;
    while (i > 0 && x > best[i - 1].v) {
      best[i] = best[i - 1];
      --i;
    }
    best[i] = {x, e};
  }
}

int64_t quantile_rank(int64_t tokens, int64_t k, int64_t experts) {
  return std::max<int64_t>(1, tokens * k / experts);
}
int64_t quantile_rank(const Scores& sc, int64_t k) {
  return quantile_rank(sc.tokens, k, sc.experts);
}

std::vector<double> zero_mean(std::vector<double> b) {
  double mean = std::accumulate(b.begin(), b.end(), 0.0) / static_cast<double>(b.size());
  for (double& x : b) x -= mean;
  return b;
}

// b_e from the sorted position `pos` (0-based) of a histogram of r over [lo, hi).
double histogram_quantile(std::span<const int64_t> h, int64_t q, bool strict, double lo,
                          double hi) {
  const auto bins = static_cast<int64_t>(h.size());
  int64_t before = 0, beta = 0;
  for (; beta < bins - 1; ++beta) {
    int64_t after = before + h[at(beta)];
    if (strict ? after > q : after >= q) break;
    before = after;
  }
  double hb = static_cast<double>(std::max<int64_t>(h[at(beta)], 1));
  double frac = std::clamp(static_cast<double>(q - before) / hb, 0.0, 1.0);
  return lo + (static_cast<double>(beta) + frac) * (hi - lo) / static_cast<double>(bins);
}

int64_t bin_of(double r, double lo, double scale, int64_t bins) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::floor((r - lo) * scale)), 0, bins - 1);
}

// r_{t,e} = alpha_t - s_{t,e}, transposed to [N, T] so each expert's values are contiguous.
// Blocked over tokens: the scores are [T, N] and a plain column walk misses the cache per element.
std::vector<double> residuals_by_expert(const Scores& sc, const std::vector<double>& alpha) {
  const int64_t n = sc.experts, tt = sc.tokens, block = 64;
  std::vector<double> r(at(n * tt));
  parallel_for((tt + block - 1) / block, parallel(sc), [&](int64_t blk) {
    const int64_t t0 = blk * block, t1 = std::min(tt, t0 + block);
    for (int64_t e = 0; e < n; ++e) {
      for (int64_t t = t0; t < t1; ++t) r[at(e * tt + t)] = alpha[at(t)] - sc.at(t, e);
    }
  });
  return r;
}

}  // namespace

Routing route(const Scores& sc, int64_t k, const std::vector<double>& bias, QbConvention conv) {
  check_args(sc, k, bias);
  Routing r;
  r.loads.assign(at(sc.experts), 0);
  r.alpha.resize(at(sc.tokens));
  std::vector<int64_t> chosen(at(sc.tokens * k));  // [T, k]
  // Blocks of tokens, each with its own scratch: the pool has no per-thread setup hook.
  constexpr int64_t kBlock = 256;
  parallel_for((sc.tokens + kBlock - 1) / kBlock, parallel(sc), [&](int64_t blk) {
    std::vector<double> v(at(sc.experts));
    std::vector<Ranked> best;
    const int64_t t1 = std::min(sc.tokens, (blk + 1) * kBlock);
    for (int64_t t = blk * kBlock; t < t1; ++t) {
      for (int64_t e = 0; e < sc.experts; ++e) v[at(e)] = sc.at(t, e) + bias[at(e)];
      top_k_plus_one(v, k, best);
      for (int64_t j = 0; j < k; ++j) chosen[at(t * k + j)] = best[at(j)].e;
      r.alpha[at(t)] = best[at(conv == QbConvention::paddle ? k : k - 1)].v;
    }
  });
  for (int64_t e : chosen) ++r.loads[at(e)];
  return r;
}

double max_violation(const std::vector<int64_t>& loads, int64_t tokens, int64_t k) {
  double mean = static_cast<double>(tokens * k) / static_cast<double>(loads.size());
  return static_cast<double>(*std::max_element(loads.begin(), loads.end())) / mean - 1;
}

std::vector<double> qb_bias_exact(const Scores& sc, int64_t k, const std::vector<double>& alpha,
                                  QbConvention conv) {
  const int64_t q = quantile_rank(sc, k);
  const int64_t pos = conv == QbConvention::paddle ? q : q - 1;
  check(pos < sc.tokens, "QB: quantile rank ", pos, " needs more than ", sc.tokens, " tokens");
  std::vector<double> b(at(sc.experts)), r = residuals_by_expert(sc, alpha);
  parallel_for(sc.experts, parallel(sc), [&](int64_t e) {
    auto first = r.begin() + e * sc.tokens;
    std::nth_element(first, first + pos, first + sc.tokens);
    b[at(e)] = first[pos];
  });
  return zero_mean(std::move(b));
}

std::vector<double> qb_bias_histogram(const Scores& sc, int64_t k, const std::vector<double>& alpha,
                                      double lo, double hi, int64_t bins, QbConvention conv) {
  check(bins >= 1, "QB: the histogram needs at least one bin, found ", bins);
  check(hi > lo, "QB: empty histogram range [", lo, ", ", hi, ")");
  const int64_t q = quantile_rank(sc, k);
  const double scale = static_cast<double>(bins) / (hi - lo);
  std::vector<double> b(at(sc.experts)), r = residuals_by_expert(sc, alpha);
  parallel_for(sc.experts, parallel(sc), [&](int64_t e) {
    std::vector<int64_t> h(at(bins), 0);
    for (int64_t t = 0; t < sc.tokens; ++t) {
      ++h[at(bin_of(r[at(e * sc.tokens + t)], lo, scale, bins))];
    }
    b[at(e)] = histogram_quantile(h, q, conv == QbConvention::paddle, lo, hi);
  });
  return zero_mean(std::move(b));
}

double qb_range_lo(const std::vector<double>& bias) {
  return *std::min_element(bias.begin(), bias.end()) - 1;
}
double qb_range_hi(const std::vector<double>& bias) {
  return *std::max_element(bias.begin(), bias.end()) + 1;
}

std::vector<double> qb_step(const Scores& sc, int64_t k, const std::vector<double>& bias,
                            int64_t bins, QbConvention conv) {
  std::vector<double> alpha = route(sc, k, bias, conv).alpha;
  if (bins == 0) return qb_bias_exact(sc, k, alpha, conv);
  return qb_bias_histogram(sc, k, alpha, qb_range_lo(bias), qb_range_hi(bias), bins, conv);
}

std::vector<double> loss_free_update(const std::vector<int64_t>& loads, int64_t tokens, int64_t k,
                                     const std::vector<double>& bias, double rate) {
  double mean = static_cast<double>(tokens * k) / static_cast<double>(loads.size());
  std::vector<double> b = bias;
  for (size_t e = 0; e < b.size(); ++e) {
    double gap = mean - static_cast<double>(loads[e]);
    b[e] += rate * static_cast<double>((gap > 0) - (gap < 0));
  }
  return b;
}

double dual_objective(const Scores& sc, int64_t k, const std::vector<double>& bias) {
  check_args(sc, k, bias);
  std::vector<double> v(at(sc.experts));
  std::vector<Ranked> best;
  double d = 0;
  for (int64_t t = 0; t < sc.tokens; ++t) {
    for (int64_t e = 0; e < sc.experts; ++e) v[at(e)] = sc.at(t, e) + bias[at(e)];
    top_k_plus_one(v, k, best);
    for (int64_t j = 0; j < k; ++j) d += best[at(j)].v;
  }
  double cap = static_cast<double>(sc.tokens * k) / static_cast<double>(sc.experts);
  return d - cap * std::accumulate(bias.begin(), bias.end(), 0.0);
}

// ---- RouterBalancer

Method parse_method(const std::string& name) {
  if (name == "none") return Method::none;
  if (name == "loss-free") return Method::loss_free;
  if (name == "qb") return Method::qb_histogram;
  if (name == "qb-exact") return Method::qb_exact;
  fail("unknown router balancing '", name, "': expected none, loss-free, qb or qb-exact");
}

const char* method_name(Method m) {
  switch (m) {
    case Method::none:
      return "none";
    case Method::loss_free:
      return "loss-free";
    case Method::qb_histogram:
      return "qb";
    case Method::qb_exact:
      return "qb-exact";
  }
  return "?";
}

RouterBalancer::RouterBalancer(int64_t experts, BalancerConfig config)
    : experts_(experts), cfg_(config), bias_(at(experts), 0.0) {
  check(experts >= 2, "router balancing: needs at least 2 experts, found ", experts);
  check(cfg_.top_k >= 1 && cfg_.top_k < experts, "router balancing: top-k (", cfg_.top_k,
        ") must be in 1..N-1 (N = ", experts, ")");
  check(cfg_.method != Method::qb_histogram || cfg_.bins >= 1,
        "router balancing: the QB histogram needs at least one bin, found ", cfg_.bins);
  check(cfg_.loss_free_rate >= 0, "router balancing: negative Loss-Free rate ",
        cfg_.loss_free_rate);
  start_step();
}

void RouterBalancer::set_bias(std::vector<double> bias) {
  check(static_cast<int64_t>(bias.size()) == experts_, "router balancing: bias has ", bias.size(),
        " entries, expected ", experts_);
  check(tokens_ == 0, "router balancing: set_bias() in the middle of a step");
  bias_ = std::move(bias);
  start_step();
}

void RouterBalancer::start_step() {
  tokens_ = 0;
  loads_.assign(at(experts_), 0);
  lo_ = qb_range_lo(bias_);
  hi_ = qb_range_hi(bias_);
  if (cfg_.method == Method::qb_histogram) counts_.assign(at(experts_ * cfg_.bins), 0);
  if (cfg_.method == Method::qb_exact) residual_.assign(at(experts_), {});
}

void RouterBalancer::observe(std::span<const float> scores, int64_t tokens,
                             std::span<const uint8_t> valid) {
  check(tokens >= 0 && scores.size() == at(tokens * experts_), "router balancing: scores have ",
        scores.size(), " values, expected ", tokens, " x ", experts_);
  check(valid.empty() || valid.size() == at(tokens), "router balancing: ", valid.size(),
        " validity flags for ", tokens, " tokens");
  Scores sc{0, experts_, {}};
  sc.s.reserve(scores.size());
  for (int64_t t = 0; t < tokens; ++t) {
    if (!valid.empty() && !valid[at(t)]) continue;
    sc.s.insert(sc.s.end(), scores.begin() + t * experts_, scores.begin() + (t + 1) * experts_);
    ++sc.tokens;
  }
  observe(sc);
}

void RouterBalancer::observe(const Scores& sc) {
  check(sc.experts == experts_, "router balancing: scores for ", sc.experts, " experts, expected ",
        experts_);
  if (sc.tokens == 0) return;
  Routing r = route(sc, cfg_.top_k, bias_, cfg_.convention);
  tokens_ += sc.tokens;
  for (int64_t e = 0; e < experts_; ++e) loads_[at(e)] += r.loads[at(e)];
  if (cfg_.method == Method::qb_histogram) {
    const std::vector<double> res = residuals_by_expert(sc, r.alpha);  // [N, T]
    const double scale = static_cast<double>(cfg_.bins) / (hi_ - lo_);
    parallel_for(experts_, parallel(sc), [&](int64_t e) {
      int64_t* h = counts_.data() + e * cfg_.bins;
      for (int64_t t = 0; t < sc.tokens; ++t)
        ++h[bin_of(res[at(e * sc.tokens + t)], lo_, scale, cfg_.bins)];
    });
  } else if (cfg_.method == Method::qb_exact) {
    const std::vector<double> res = residuals_by_expert(sc, r.alpha);
    for (int64_t e = 0; e < experts_; ++e) {
      residual_[at(e)].insert(residual_[at(e)].end(), res.begin() + e * sc.tokens,
                              res.begin() + (e + 1) * sc.tokens);
    }
  }
}

void RouterBalancer::add_counts(std::span<const int64_t> counts, int64_t tokens) {
  check(cfg_.method == Method::qb_histogram,
        "router balancing: add_counts() needs QB histogram mode");
  check(counts.size() == counts_.size() && tokens >= 0, "router balancing: counts have ",
        counts.size(), " entries, expected ", counts_.size());
  for (size_t i = 0; i < counts.size(); ++i) counts_[i] += counts[i];
  tokens_ += tokens;
}

StepStats RouterBalancer::finish_step() {
  StepStats st;
  st.tokens = tokens_;
  st.loads = loads_;
  if (tokens_ == 0) {
    start_step();
    return st;
  }
  st.max_vio = max_violation(loads_, tokens_, cfg_.top_k);
  const int64_t q = quantile_rank(tokens_, cfg_.top_k, experts_);
  const bool paddle = cfg_.convention == QbConvention::paddle;
  switch (cfg_.method) {
    case Method::none:
      break;
    case Method::loss_free:
      bias_ = loss_free_update(loads_, tokens_, cfg_.top_k, bias_, cfg_.loss_free_rate);
      break;
    case Method::qb_histogram: {
      std::vector<double> b(at(experts_));
      for (int64_t e = 0; e < experts_; ++e) {
        std::span<const int64_t> h(counts_.data() + e * cfg_.bins, at(cfg_.bins));
        b[at(e)] = histogram_quantile(h, q, paddle, lo_, hi_);
      }
      bias_ = zero_mean(std::move(b));
      break;
    }
    case Method::qb_exact: {
      const int64_t pos = paddle ? q : q - 1;
      check(pos < tokens_, "QB: quantile rank ", pos, " needs more than ", tokens_, " tokens");
      std::vector<double> b(at(experts_));
      for (int64_t e = 0; e < experts_; ++e) {
        std::vector<double>& r = residual_[at(e)];
        std::nth_element(r.begin(), r.begin() + pos, r.end());
        b[at(e)] = r[at(pos)];
      }
      bias_ = zero_mean(std::move(b));
      break;
    }
  }
  start_step();
  return st;
}

}  // namespace k3::balance
