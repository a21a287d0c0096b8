#include "cost/situ.h"

#include <cmath>

namespace k3::cost {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double glu(double a, double b) { return sigmoid(a) * b; }
double swiglu(double a, double b) { return a * sigmoid(a) * b; }
double situ_gate(double a, double beta_gate) {
  return beta_gate * std::tanh(a / beta_gate) * sigmoid(a);
}
double situ_up(double b, double beta_up) { return beta_up * std::tanh(b / beta_up); }

double situ_glu(double a, double b, const SituBetas& beta) {
  return situ_gate(a, beta.gate) * situ_up(b, beta.up);
}

std::vector<SituRow> situ_table(const SituBetas& beta) {
  const double points[][2] = {{40, 40}, {2, 3}, {1, 1}, {-1, 1}, {10, 10}, {0, 5}};
  std::vector<SituRow> rows;
  for (const auto& p : points) {
    rows.push_back({p[0], p[1], situ_glu(p[0], p[1], beta), swiglu(p[0], p[1]), glu(p[0], p[1])});
  }
  return rows;
}

GateMinimum situ_gate_minimum(double beta_gate) {
  // The gate is negative on a < 0, tends to 0 at both ends of that range, and has one minimum.
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double lo = -20, hi = 0;
  for (int i = 0; i < 200 && hi - lo > 1e-13; ++i) {
    double x1 = hi - phi * (hi - lo), x2 = lo + phi * (hi - lo);
    if (situ_gate(x1, beta_gate) < situ_gate(x2, beta_gate)) {
      hi = x2;
    } else {
      lo = x1;
    }
  }
  double a = (lo + hi) / 2;
  return {a, situ_gate(a, beta_gate)};
}

SituCurves situ_curves(const SituBetas& beta, double lo, double hi, int n, double diag_hi) {
  SituCurves c;
  for (int i = 0; i < n; ++i) {
    double a = lo + (hi - lo) * i / (n - 1);
    c.a.push_back(a);
    c.glu_gate.push_back(sigmoid(a));
    c.swiglu_gate.push_back(a * sigmoid(a));
    c.situ_gate.push_back(situ_gate(a, beta.gate));
    double x = diag_hi * (i + 1) / n;  // (0, diag_hi], positive for a log axis
    c.diag.push_back(x);
    c.diag_swiglu.push_back(swiglu(x, x));
    c.diag_situ.push_back(situ_glu(x, x, beta));
  }
  return c;
}

}  // namespace k3::cost
