#include "cost/qb_sim.h"

#include <cmath>
#include <numbers>
#include <random>
#include <utility>

#include "k3/error.h"

namespace k3::cost {
namespace {

// Uniform in (0, 1) from the top 53 bits: platform-independent, unlike std::*_distribution.
double unit_uniform(std::mt19937_64& gen) {
  return (static_cast<double>(gen() >> 11) + 0.5) * 0x1.0p-53;
}

// Box-Muller normals from unit_uniform.
class Normal {
 public:
  explicit Normal(uint64_t seed) : gen_(seed) {}
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = unit_uniform(gen_), u2 = unit_uniform(gen_);
    double r = std::sqrt(-2 * std::log(u1)), th = 2 * std::numbers::pi * u2;
    spare_ = r * std::sin(th);
    has_spare_ = true;
    return r * std::cos(th);
  }

 private:
  std::mt19937_64 gen_;
  double spare_ = 0;
  bool has_spare_ = false;
};

uint64_t step_seed(uint64_t seed, int64_t step) {
  // splitmix64 of (seed, step + 1): distinct, well-mixed streams per batch.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(step + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void check_options(const QbSimOptions& o) {
  check(o.experts >= 2 && o.top_k >= 1 && o.top_k < o.experts, "QB simulation: need 1 <= k < N, ",
        "found k = ", o.top_k, ", N = ", o.experts);
  check(o.tokens * o.top_k >= o.experts, "QB simulation: T k (", o.tokens * o.top_k,
        ") must be at least N (", o.experts, ") for a k/N quantile");
  check(o.steps >= 1 && o.bins >= 1, "QB simulation: steps and bins must be positive");
  check(o.skew >= 0 && o.lf_rate >= 0, "QB simulation: skew and Loss-Free rate must be >= 0");
}

}  // namespace

std::vector<double> qb_sim_popularity(const QbSimOptions& o) {
  Normal normal(o.seed);
  std::vector<double> mu(static_cast<size_t>(o.experts));
  for (double& m : mu) m = o.skew * normal();
  return mu;
}

Scores qb_sim_batch(const QbSimOptions& o, const std::vector<double>& popularity, int64_t step) {
  // s = sigmoid(mu + L) with L = log(u / (1 - u)) standard logistic: s = u / (u + e^-mu (1 - u)).
  std::mt19937_64 gen(step_seed(o.seed, step));
  std::vector<double> damp(popularity.size());
  for (size_t e = 0; e < damp.size(); ++e) damp[e] = std::exp(-popularity[e]);
  Scores sc{o.tokens, o.experts, std::vector<double>(static_cast<size_t>(o.tokens * o.experts))};
  double* out = sc.s.data();
  for (int64_t t = 0; t < o.tokens; ++t) {
    for (double d : damp) {
      double u = unit_uniform(gen);
      *out++ = u / (u + d * (1 - u));
    }
  }
  return sc;
}

QbSimResult qb_simulate(const QbSimOptions& o) {
  check_options(o);
  // The training code's balancers, one per method, each fed the same batch once per step.
  using balance::Method;
  auto make = [&](Method m) {
    return balance::RouterBalancer(o.experts,
                                   {m, o.top_k, o.bins, QbConvention::paddle, o.lf_rate});
  };
  balance::RouterBalancer exact = make(Method::qb_exact), hist = make(Method::qb_histogram),
                          lf = make(Method::loss_free);
  const std::vector<double> mu = qb_sim_popularity(o);
  QbSimResult res;
  res.options = o;
  for (int64_t step = 0; step < o.steps; ++step) {
    Scores sc = qb_sim_batch(o, mu, step);
    for (auto [bal, out] : {std::pair{&exact, &res.exact}, std::pair{&hist, &res.histogram},
                            std::pair{&lf, &res.loss_free}}) {
      bal->observe(sc);
      out->push_back(bal->finish_step().max_vio);
    }
    double gap = std::abs(res.exact.back() - res.histogram.back());
    if (gap > res.max_gap) {
      res.max_gap = gap;
      res.max_gap_step = step;
    }
  }
  return res;
}

}  // namespace k3::cost
