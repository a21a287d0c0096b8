// Router-bias balancing rules on a batch of router scores: Quantile Balancing (QB, exact and
// histogram) and Loss-Free, plus the measures used to compare them (MaxVio, the dual objective).
// Spec §7; [A2] "Loss-Free and QB: balancing expert workloads", FIG 15-17.
//
// Scores are a row-major [T, N] matrix of unbiased router scores s (sigmoid outputs, in (0,1)).
// Selection takes the k largest biased scores s + b per token (ties broken by the lower expert
// index, so every result is deterministic). With q = max(1, floor(T k / N)):
//
//   alpha_t   token t's threshold among its biased scores (convention below)
//   r_{t,e}   = alpha_t - s_{t,e}: the bias expert e needs to be selected by token t
//   b_e       = a k/N quantile of r_{.,e} (convention below), then b <- b - mean(b)
//
// Conventions (spec §13 item 6 leaves them open):
//   paddle  alpha_t = (k+1)-th largest, b_e = (q+1)-th smallest r (the histogram's first bin with
//           cumulative count > q). PaddleFleet's current code [P1]; used by the simulation.
//   kth     alpha_t = k-th largest, b_e = q-th smallest r (cumulative count >= q). For k = 1 and
//           T = N this is exact block-coordinate descent on the dual, which can stall (qb_toy.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3::cost {

enum class QbConvention { paddle, kth };

struct Scores {
  int64_t tokens = 0, experts = 0;
  std::vector<double> s;  // [tokens, experts]
  double at(int64_t t, int64_t e) const { return s[static_cast<size_t>(t * experts + e)]; }
};

// One routing pass under bias b: the tokens sent to each expert and each token's threshold.
struct Routing {
  std::vector<int64_t> loads;  // [N]
  std::vector<double> alpha;   // [T]
};
Routing route(const Scores& sc, int64_t k, const std::vector<double>& bias, QbConvention conv);
// MaxVio = max_e load_e / mean_load - 1, mean_load = T k / N (Loss-Free paper, the [A2] ref 19).
double max_violation(const std::vector<int64_t>& loads, int64_t tokens, int64_t k);
// QB with exact order statistics of r, from the thresholds of a routing pass; zero-mean [N].
std::vector<double> qb_bias_exact(const Scores& sc, int64_t k, const std::vector<double>& alpha,
                                  QbConvention conv);
// QB with a B-bin histogram of r over [lo, hi), values outside clipped into the end bins, and
// linear interpolation inside the quantile bin; zero-mean [N].
std::vector<double> qb_bias_histogram(const Scores& sc, int64_t k, const std::vector<double>& alpha,
                                      double lo, double hi, int64_t bins, QbConvention conv);
// The histogram range of spec §7.2 for the current bias: [min(b) - 1, max(b) + 1].
double qb_range_lo(const std::vector<double>& bias);
double qb_range_hi(const std::vector<double>& bias);
// One full QB step (route, then quantile): exact when bins == 0, else histogram.
std::vector<double> qb_step(const Scores& sc, int64_t k, const std::vector<double>& bias,
                            int64_t bins, QbConvention conv);
// Loss-Free: b_e += u sign(mean_load - load_e).
std::vector<double> loss_free_update(const std::vector<int64_t>& loads, int64_t tokens, int64_t k,
                                     const std::vector<double>& bias, double rate);
// Dual of the balanced assignment LP (each token k experts, each expert T k / N tokens):
//   D(b) = sum_t (sum of the k largest s_t + b) - (T k / N) sum_e b_e  >=  the primal optimum.
double dual_objective(const Scores& sc, int64_t k, const std::vector<double>& bias);

}  // namespace k3::cost
