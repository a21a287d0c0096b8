// The op harness's grad mode: every op with a `bwd` launcher declares gradient cases. A case
// builds fresh random inputs (never zeros) and two closures: the op's reference forward and
// its bwd. The driver draws a random output gradient dy, and for each differentiable input
// compares bwd's gradient of L = Σ dy · forward(inputs) with 5-point central differences of L,
// summed in double, over every element (or a random sample of a large input). Steps are powers
// of two and the inputs are rounded to a grid of step/64, so every x ± h, x ± 2h is exact in
// fp32. The driver also checks that bwd adds into the gradients it is given.
#pragma once

#include <functional>
#include <random>
#include <string>
#include <vector>

namespace k3::test {

struct GradInput {
  std::string name;
  std::vector<float> value;
  double step = 3e-2;  // finite-difference step, relative to the input's RMS
};

using Tensors = std::vector<std::vector<float>>;

struct GradProblem {
  std::vector<GradInput> inputs;  // the differentiable inputs
  // The op's reference forward on `in` (shaped like inputs): every output, flattened.
  std::function<std::vector<float>(const Tensors& in)> forward;
  // The op's bwd: adds to grads[i] (shaped like inputs[i]) the gradient of Σ dy · forward(in).
  std::function<void(const Tensors& in, const std::vector<float>& dy, Tensors& grads)> backward;
};

struct GradCase {
  std::string op;     // the registry op whose bwd is checked
  std::string shape;  // "T=9 H=2 K=8 V=6"
  double tol;         // on max|bwd − numeric| / max|numeric|, per input
  std::function<GradProblem(std::mt19937_64&)> make;
};

std::vector<GradCase>& grad_registry();

struct RegisterGrad {
  explicit RegisterGrad(std::vector<GradCase> cases);
};

}  // namespace k3::test
