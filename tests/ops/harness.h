// The op test harness (in the spirit of llama.cpp's test-backend-ops): every op is declared
// once as a list of cases; each case builds fresh random inputs (never zeros), runs the
// implementation under test and the plain reference, and returns both outputs. The gtest
// driver compares them with the case's tolerance; bench/ reuses the same cases for timing.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace k3::test {

struct Outputs {
  std::vector<float> got;    // implementation under test
  std::vector<double> want;  // reference
  // Error scale; 0 means max|want|. Sums that cancel (a dot product of mixed signs) pass the
  // bound they can be held to: Σ|terms|, the standard fp32 summation error scale.
  double scale = 0;
};

struct OpCase {
  std::string op;     // "kda_chunked"
  std::string shape;  // "T=65 H=2 K=16 V=8"
  double tol;         // on max|got-want| / max(|want|)
  std::function<Outputs(std::mt19937_64&)> run;
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

template <typename T>
std::vector<double> widen(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// max|got − want| / max|want| (0/0 counts as 0).
double rel_max_error(const std::vector<float>& got, const std::vector<double>& want,
                     double scale = 0);

}  // namespace k3::test
