// Router-bias balancing (spec §7): Quantile Balancing (QB, exact and histogram), Loss-Free and
// none, with the measures used to compare them (MaxVio, the dual objective). The training loop
// uses RouterBalancer; `k3 cost` runs the same code in its seeded simulation.
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
//           cumulative count > q). PaddleFleet's current code; the default.
//   kth     alpha_t = k-th largest, b_e = q-th smallest r (cumulative count >= q). For k = 1 and
//           T = N this is exact block-coordinate descent on the dual, which can stall at a
//           suboptimal fixed point (the 3x3 example of `k3 cost`).
//
//   k3::balance::RouterBalancer qb(n_expert, {.method = Method::qb_histogram, .top_k = 4});
//   for each micro-batch of the step: qb.observe(scores, tokens);   // routed with qb.bias()
//   StepStats st = qb.finish_step();   // new bias (zero mean), MaxVio of the step's routing
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace k3::balance {

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
// MaxVio = max_e load_e / mean_load - 1, mean_load = T k / N (the Loss-Free paper's measure).
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

// ---- The training-side balancer: one per MoE layer, state across micro-batches and steps.

enum class Method { none, loss_free, qb_histogram, qb_exact };
Method parse_method(const std::string& name);  // "none", "loss-free", "qb", "qb-exact"
const char* method_name(Method m);

struct BalancerConfig {
  Method method = Method::qb_histogram;
  int64_t top_k = 1;
  int64_t bins = 1000;  // qb_n_bins (PaddleFleet's default)
  QbConvention convention = QbConvention::paddle;
  double loss_free_rate = 1e-3;  // u (DeepSeek-V3's value)
};

struct StepStats {
  int64_t tokens = 0;          // tokens observed this step (padding excluded)
  std::vector<int64_t> loads;  // [N] tokens routed to each expert under the step's bias
  double max_vio = 0;          // of those loads
};

class RouterBalancer {
 public:
  RouterBalancer(int64_t experts, BalancerConfig config);

  // The bias to route with during the current step ([N], zero at the start). The model keeps
  // e_score_correction_bias in fp32: route it with float(bias()[e]); the balancer's own routing
  // is in double, so an exact near-tie may go the other way there (a load off by one token).
  const std::vector<double>& bias() const { return bias_; }
  void set_bias(std::vector<double> bias);  // e.g. on resume; must be called between steps

  // One micro-batch of unbiased scores [tokens, N], routed under bias(). Rows whose `valid`
  // entry is 0 (padding) are left out; an empty `valid` keeps every row. Histogram counts
  // (QB; N x bins integers), residuals (exact QB: every one, N x tokens doubles, so exact mode
  // is for checks and small runs) and loads accumulate until finish_step().
  void observe(std::span<const float> scores, int64_t tokens, std::span<const uint8_t> valid = {});
  void observe(const Scores& scores);
  // Ends the optimiser step: updates the bias by the method, resets the accumulators, returns
  // the step's routing statistics. A step that observed no token leaves the bias unchanged.
  StepStats finish_step();

  // The step's summed histogram counts, [N, bins] (QB histogram mode), e.g. to sum across
  // workers before finish_step(): add_counts() adds another worker's counts of the same step.
  const std::vector<int64_t>& counts() const { return counts_; }
  void add_counts(std::span<const int64_t> counts, int64_t tokens);
  // The histogram range of the current step.
  double range_lo() const { return lo_; }
  double range_hi() const { return hi_; }

 private:
  void start_step();
  int64_t experts_;
  BalancerConfig cfg_;
  std::vector<double> bias_;
  double lo_ = -1, hi_ = 1;
  int64_t tokens_ = 0;
  std::vector<int64_t> loads_;
  std::vector<int64_t> counts_;                // [N, bins]
  std::vector<std::vector<double>> residual_;  // [N][tokens] (exact mode)
};

}  // namespace k3::balance
