#include "cost/qb_toy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "k3/error.h"

namespace k3::cost {

Scores qb_toy_scores() { return Scores{3, 3, {0, 0, 1, 0, 2, 0, 0, 3, 0}}; }

double best_assignment(const Scores& sc, std::vector<int64_t>* best) {
  check(sc.tokens == sc.experts && sc.tokens <= 9, "best_assignment: needs a square matrix of at ",
        "most 9 x 9, found ", sc.tokens, " x ", sc.experts);
  std::vector<int64_t> perm(static_cast<size_t>(sc.tokens));
  std::iota(perm.begin(), perm.end(), 0);
  double top = -INFINITY;
  do {
    double sum = 0;
    for (int64_t t = 0; t < sc.tokens; ++t) sum += sc.at(t, perm[static_cast<size_t>(t)]);
    if (sum > top) {
      top = sum;
      if (best) *best = perm;
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  return top;
}

QbToyRun qb_alternate(const Scores& sc, QbConvention conv, int max_iter) {
  QbToyRun run;
  run.convention = conv;
  run.bias.push_back(std::vector<double>(static_cast<size_t>(sc.experts), 0.0));
  run.dual.push_back(dual_objective(sc, 1, run.bias.back()));
  for (int i = 0; i < max_iter; ++i) {
    std::vector<double> b = qb_step(sc, 1, run.bias.back(), 0, conv);
    double change = 0;
    for (size_t e = 0; e < b.size(); ++e)
      change = std::max(change, std::abs(b[e] - run.bias.back()[e]));
    if (change < 1e-12) {
      run.fixed_point = true;
      break;
    }
    run.bias.push_back(b);
    run.dual.push_back(dual_objective(sc, 1, b));
  }
  return run;
}

QbToyResult qb_toy() {
  QbToyResult r;
  r.scores = qb_toy_scores();
  r.optimum = best_assignment(r.scores, &r.best);
  r.kth = qb_alternate(r.scores, QbConvention::kth, 50);
  r.paddle = qb_alternate(r.scores, QbConvention::paddle, 50);
  return r;
}

}  // namespace k3::cost
