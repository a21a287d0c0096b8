// SiTU-GLU against SwiGLU and GLU in exact (double) arithmetic: spec §6.1, §11.1; [A2] "Inside an
// expert: GLU -> SwiGLU -> SiTU", FIG 08 and FIG 10.
//
//   GLU       sigma(a) * b
//   SwiGLU    a sigma(a) * b
//   SiTU-GLU  b1 tanh(a/b1) sigma(a) * b2 tanh(b/b2)      (b1 = activation_situ_beta = 4,
//                                                           b2 = activation_situ_linear_beta = 25)
// The SiTU gate branch lies in [min, b1): its minimum is about -0.26977 at a = -1.219 for b1 = 4.
#pragma once

#include <vector>

namespace k3::cost {

struct SituBetas {
  double gate = 4.0;  // beta_1
  double up = 25.0;   // beta_2
};

double sigmoid(double x);
double glu(double a, double b);
double swiglu(double a, double b);
double situ_gate(double a, double beta_gate);  // b1 tanh(a/b1) sigma(a)
double situ_up(double b, double beta_up);      // b2 tanh(b/b2)
double situ_glu(double a, double b, const SituBetas& beta);

struct SituRow {
  double a = 0, b = 0;
  double situ = 0, swiglu = 0, glu = 0;
};

// The closed-form checks of spec §11.1: (40,40), (2,3), (1,1), (-1,1), (10,10), (0,5).
std::vector<SituRow> situ_table(const SituBetas& beta);

struct GateMinimum {
  double a = 0, value = 0;
};
// Minimum of the gate branch over a < 0 (golden-section search to ~1e-12).
GateMinimum situ_gate_minimum(double beta_gate);

// Sampled curves for plots: gate branches over a in [lo, hi] (n points), and the a = b diagonal.
struct SituCurves {
  std::vector<double> a, glu_gate, swiglu_gate, situ_gate;  // sigma(a), a sigma(a), SiTU gate
  std::vector<double> diag, diag_swiglu, diag_situ;         // a = b in (0, diag_hi]
};
SituCurves situ_curves(const SituBetas& beta, double lo, double hi, int n, double diag_hi);

}  // namespace k3::cost
