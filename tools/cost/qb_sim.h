// A seeded QB simulation (run by the training code's RouterBalancer) in the spirit of [A2] FIG 17
// ("a fixed distribution with resampled batches", 41 observations, seed 20260909): exact-quantile
// QB, B-bin histogram QB and Loss-Free route the same batches, and MaxVio is recorded per step.
//
// Synthetic router (our choice; the article's generator was not published): expert e has a fixed
// popularity mu_e ~ Normal(0, skew^2) drawn once from the seed; every step draws a fresh batch of
// T tokens with logits mu_e + z_{t,e}, z ~ Normal(0, 1), and scores s = sigmoid(logit).
// Observation i (i = 0 .. steps-1) routes batch i with the current biases, records MaxVio, then
// updates each method's bias from that batch; observation 0 uses b = 0 for all three.
// Randomness: std::mt19937_64 (sequence fixed by the C++ standard) and our own Box-Muller, so a
// seed gives the same batches with any standard library.
#pragma once

#include <cstdint>
#include <vector>

#include "cost/qb.h"

namespace k3::cost {

struct QbSimOptions {
  int64_t experts = 896;  // N
  int64_t top_k = 16;     // k
  int64_t tokens = 4096;  // T per batch
  int64_t steps = 41;     // observations
  int64_t bins = 1000;    // histogram bins B (PaddleFleet's default)
  uint64_t seed = 20260909;
  double skew = 0.5;      // std of the expert popularity offsets mu_e
  double lf_rate = 1e-3;  // Loss-Free step u (DeepSeek-V3's value)
};

struct QbSimResult {
  QbSimOptions options;
  std::vector<double> exact, histogram, loss_free;  // MaxVio per observation
  double max_gap = 0;                               // max over observations of |exact - histogram|
  int64_t max_gap_step = 0;
};

// One batch of synthetic router scores; the same (options, step) always gives the same batch.
Scores qb_sim_batch(const QbSimOptions& o, const std::vector<double>& popularity, int64_t step);
std::vector<double> qb_sim_popularity(const QbSimOptions& o);
QbSimResult qb_simulate(const QbSimOptions& o);

}  // namespace k3::cost
