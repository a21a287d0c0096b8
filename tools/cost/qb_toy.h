// The enumerable 3x3 example of [A2] ("alternating updates can stop at a suboptimal fixed point
// ... the fixed-point dual objective is 5, while the best one-to-one assignment scores 4").
// The article's matrix was not published; ours is the first found by an exhaustive search over
// 3x3 integer matrices with entries 0..3 (scanned row-major) in which the `kth` convention moves
// once from b = 0 and then stalls with dual 5 against an optimum of 4:
//
//            e0 e1 e2
//   token 0 [ 0  0  1 ]      b = 0:        dual 6
//   token 1 [ 0  2  0 ]      kth, 1 step:  b = (2/3, -1/3, -1/3), dual 5, a fixed point
//   token 2 [ 0  3  0 ]      optimum:      t0->e2, t1->e0, t2->e1 = 1 + 0 + 3 = 4
//
// k = 1 and T = N = 3, so every expert should take exactly one token. Under `kth` the update
// b_e <- min_t (max_e' (s + b) - s_{t,e}) is block-coordinate descent on the dual; at the fixed
// point every expert is tight for some token (t0 is tied between e0 and e2) but the tight edges
// hold no perfect matching, so the dual stays above the optimum. The `paddle` convention reaches
// the optimum 4 on this matrix.
#pragma once

#include <cstdint>
#include <vector>

#include "cost/qb.h"

namespace k3::cost {

struct QbToyRun {
  QbConvention convention = QbConvention::kth;
  std::vector<std::vector<double>> bias;  // b after each update, b[0] = 0
  std::vector<double> dual;               // dual objective at each b
  bool fixed_point = false;               // stopped because b stopped changing
};

struct QbToyResult {
  Scores scores;              // 3 x 3
  double optimum = 0;         // best one-to-one assignment (enumerated)
  std::vector<int64_t> best;  // token -> expert of that assignment
  QbToyRun kth, paddle;
};

Scores qb_toy_scores();
// Best assignment of a square score matrix with one expert per token, by enumeration.
double best_assignment(const Scores& sc, std::vector<int64_t>* best);
// Alternating QB updates (exact quantiles, k = 1) until b stops changing or max_iter.
QbToyRun qb_alternate(const Scores& sc, QbConvention conv, int max_iter);
QbToyResult qb_toy();

}  // namespace k3::cost
