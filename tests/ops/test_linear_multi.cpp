// linear_multi (projections sharing x) against linear's double reference, output by output:
// mixed formats and row counts, decode and larger T, more matrices than one device launch
// takes, matrices of one row.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/harness.h"
#include "ops/linear/linear.h"
#include "ops/random_weight.h"

namespace k3::test {
namespace {

struct Proj {
  int64_t rows;
  MatFormat f;
};

OpCase multi_case(int64_t T, int64_t cols, std::vector<Proj> ps) {
  const char* fname[] = {"bf16", "f32", "mxfp4"};
  std::string shape = "T=" + std::to_string(T) + " cols=" + std::to_string(cols) + " rows";
  for (const Proj& p : ps) shape += " " + std::to_string(p.rows) + fname[static_cast<int>(p.f)];
  return {"linear_multi", shape, 1e-6, [=](std::mt19937_64& rng, Impl impl) {
            const int64_t n = static_cast<int64_t>(ps.size());
            std::vector<Weight> w;
            std::vector<Mat> mats;
            for (const Proj& p : ps) w.push_back(random_weight(rng, p.rows, cols, p.f));
            for (const Weight& x : w) mats.push_back(x.mat);
            const std::vector<float> x = randn(rng, T * cols);
            std::vector<std::vector<float>> got(n);
            std::vector<float*> ys;
            for (int64_t i = 0; i < n; ++i) {
              got[i] = randn(rng, T * ps[i].rows);  // overwritten
              ys.push_back(got[i].data());
            }
            kLinearMultiOp.get(impl)(x.data(), T, mats.data(), ys.data(), n);
            std::vector<float> all;
            std::vector<double> want;
            double scale = 0;  // the largest Σ_i |x_i·w_i| over outputs
            std::vector<float> row(cols);
            for (int64_t i = 0; i < n; ++i) {
              std::vector<float> ref(T * ps[i].rows);
              kLinearOp.ref(x.data(), T, mats[i], ref.data());
              all.insert(all.end(), got[i].begin(), got[i].end());
              want.insert(want.end(), ref.begin(), ref.end());
              for (int64_t r = 0; r < ps[i].rows; ++r) {
                mat_row(mats[i], r, row.data());
                for (int64_t t = 0; t < T; ++t) {
                  double s = 0;
                  for (int64_t c = 0; c < cols; ++c)
                    s += std::fabs(double(x[t * cols + c]) * row[c]);
                  scale = std::max(scale, s);
                }
              }
            }
            return Outputs{all, want, scale};
          }};
}

std::vector<OpCase> cases() {
  const MatFormat b = MatFormat::bf16, f = MatFormat::f32, m = MatFormat::mxfp4;
  std::vector<OpCase> v;
  for (int64_t T : {1, 3, 8, 9}) {
    v.push_back(multi_case(T, 64, {{40, b}, {40, b}, {8, b}}));  // the KDA-like set
    v.push_back(multi_case(T, 96, {{33, b}, {1, b}, {70, f}, {5, b}, {32, m}}));  // mixed
    v.push_back(multi_case(T, 256, {{17, b}, {300, b}}));
  }
  v.push_back(multi_case(1, 64,
                         {{9, b},
                          {3, b},
                          {31, b},
                          {1, b},
                          {64, b},
                          {7, b},
                          {2, b},
                          {40, b},
                          {5, b},
                          {12, b}}));                              // 10: past one launch's 8
  v.push_back(multi_case(2, 40, {{6, b}, {11, b}}));               // 40 columns (GEMV: 8-aligned)
  v.push_back(multi_case(1, 12, {{6, b}, {11, b}}));               // 12 columns: the scalar GEMV
  v.push_back(multi_case(1, 7168, {{96, b}, {64, b}, {130, b}}));  // the model's width
  v.push_back(multi_case(4, 32, {{1, b}}));                        // one matrix
  return v;
}

static Register reg(cases());

}  // namespace
}  // namespace k3::test
