// The op test harness (in the spirit of llama.cpp's test-backend-ops): every registry op is
// declared once as a list of cases; each case builds fresh random inputs (never zeros), runs
// the implementation under test and the op's `ref` through its OpTable, and returns both
// outputs. The gtest driver instantiates one test per (case, implementation registered for the
// op other than ref: cpu, and cuda once a backend fills it) and compares them with the case's
// tolerance. Every registered op must have cases (checked). bench/ reuses the builders for
// timing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace k3::test {

struct Outputs {
  std::vector<float> got;    // implementation under test
  std::vector<double> want;  // reference
  // Error scale; 0 means max|want|. Sums that cancel (a dot product of mixed signs) pass the
  // bound they can be held to: Σ|terms|, the standard fp32 summation error scale.
  double scale = 0;
};

struct OpCase {
  std::string op;     // the registry op under test: "kda_chunked"
  std::string shape;  // "T=65 H=2 K=16 V=8"
  double tol;         // on max|got-want| / max(|want|)
  // Builds inputs from the rng, runs kXxxOp.get(impl) (got) and kXxxOp.ref (want).
  std::function<Outputs(std::mt19937_64&, Impl)> run;
};

std::vector<OpCase>& op_registry();

// Perf mode (the micro-benchmark): a case prepares inputs at a real model's shapes, using the
// same input builders as the test cases, and returns a closure that runs only the
// implementation. `bench/ops_perf.sh` times every registered case (median of repeats).
struct PerfCase {
  std::string op;
  std::string shape;
  double flops;  // per run, for GFLOP/s
  double bytes;  // weight/state bytes streamed per run, for GB/s
  std::function<std::function<void()>(std::mt19937_64&)> prepare;
};

std::vector<PerfCase>& perf_registry();

struct RegisterPerf {
  explicit RegisterPerf(std::vector<PerfCase> cases);
};

// Registers cases at static-init time: `static Register r({...});`
struct Register {
  explicit Register(std::vector<OpCase> cases);
};

inline std::string cat_shape(int64_t T, int64_t rows, int64_t cols) {
  return "T=" + std::to_string(T) + " rows=" + std::to_string(rows) +
         " cols=" + std::to_string(cols);
}

inline std::vector<float> randn(std::mt19937_64& rng, size_t n, double scale = 1.0) {
  std::normal_distribution<double> d(0.0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(rng));
  return v;
}

inline std::vector<float> randu(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(rng));
  return v;
}

// n flat routing choices t*k + j over T tokens, in random order, each at most once
// (as one expert's choices are); n <= T*k.
inline std::vector<int64_t> rand_choices(std::mt19937_64& rng, int64_t T, int64_t k, int64_t n) {
  std::vector<int64_t> all(static_cast<size_t>(T * k));
  for (int64_t i = 0; i < T * k; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(n));
  return all;
}

template <typename T>
std::vector<double> widen(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// max|got − want| / max|want| (0/0 counts as 0).
double rel_max_error(const std::vector<float>& got, const std::vector<double>& want,
                     double scale = 0);

}  // namespace k3::test
