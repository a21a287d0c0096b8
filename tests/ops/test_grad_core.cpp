// Gradient checks (grad mode, grad_harness.h) of the dense, norm, element-wise, routing and
// data-movement ops, and of the cross-entropy loss.
#include <cmath>
#include <string>

#include "ops/copy/copy.h"
#include "ops/elementwise/elementwise.h"
#include "ops/grad_harness.h"
#include "ops/harness.h"
#include "ops/linear/linear.h"
#include "ops/loss/cross_entropy.h"
#include "ops/moe/moe_combine.h"
#include "ops/moe/router.h"
#include "ops/norm/norm.h"
#include "ops/situ/situ.h"

namespace k3::test {
namespace {

std::string dims(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  std::string s;
  for (const auto& [k, v] : kv)
    s += (s.empty() ? "" : " ") + std::string(k) + "=" + std::to_string(v);
  return s;
}

Mat f32_mat(const std::vector<float>& w, int64_t rows, int64_t cols) {
  return {rows, cols, MatFormat::f32, w.data(), nullptr};
}

GradCase linear_grad(int64_t T, int64_t R, int64_t C) {
  return {"linear", dims({{"T", T}, {"rows", R}, {"cols", C}}), 1e-4, [=](std::mt19937_64& rng) {
            GradProblem p;
            p.inputs = {{"x", randn(rng, T * C)}, {"W", randn(rng, R * C, 0.5)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> y(T * R);
              kLinearOp.ref(in[0].data(), T, f32_mat(in[1], R, C), y.data());
              return y;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kLinearOp.bwd(in[0].data(), T, f32_mat(in[1], R, C), dy.data(), g[0].data(),
                            g[1].data());
            };
            return p;
          }};
}

// A one-element norm is ±1 except near |x| ~ sqrt(eps): probe it there.
double x_scale(int64_t n, double eps) { return n == 1 ? std::sqrt(eps) : 2.0; }

GradCase rms_grad(int64_t rows, int64_t n) {
  return {
      "rms_norm", dims({{"rows", rows}, {"n", n}}), 1e-4, [=](std::mt19937_64& rng) {
        GradProblem p;
        p.inputs = {{"x", randn(rng, rows * n, x_scale(n, 1e-5))}, {"w", randu(rng, n, 0.5, 1.5)}};
        p.forward = [=](const Tensors& in) {
          std::vector<float> y(rows * n);
          kRmsNormOp.ref(in[0].data(), rows, n, in[1].data(), 1e-5f, y.data());
          return y;
        };
        p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
          kRmsNormOp.bwd(in[0].data(), rows, n, in[1].data(), 1e-5f, dy.data(), g[0].data(),
                         g[1].data());
        };
        return p;
      }};
}

GradCase gated_rms_grad(int64_t rows, int64_t n) {
  return {"gated_rms_norm", dims({{"rows", rows}, {"n", n}}), 1e-4, [=](std::mt19937_64& rng) {
            GradProblem p;
            p.inputs = {{"x", randn(rng, rows * n, 2.0)},
                        {"z", randn(rng, rows * n, 2.0)},
                        {"w", randu(rng, n, 0.5, 1.5)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> y(rows * n);
              kGatedRmsNormOp.ref(in[0].data(), in[1].data(), rows, n, in[2].data(), 1e-5f,
                                  y.data());
              return y;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kGatedRmsNormOp.bwd(in[0].data(), in[1].data(), rows, n, in[2].data(), 1e-5f,
                                  dy.data(), g[0].data(), g[1].data(), g[2].data());
            };
            return p;
          }};
}

GradCase l2_grad(int64_t rows, int64_t n) {
  return {"l2_norm", dims({{"rows", rows}, {"n", n}}), 1e-4, [=](std::mt19937_64& rng) {
            GradProblem p;
            p.inputs = {{"x", randn(rng, rows * n, x_scale(n, 1e-6))}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> y(rows * n);
              kL2NormOp.ref(in[0].data(), rows, n, 1e-6f, y.data());
              return y;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kL2NormOp.bwd(in[0].data(), rows, n, 1e-6f, dy.data(), g[0].data());
            };
            return p;
          }};
}

GradCase situ_grad(int64_t n) {
  return {"situ_glu", dims({{"n", n}}), 1e-4, [=](std::mt19937_64& rng) {
            GradProblem p;
            p.inputs = {{"gate", randn(rng, n, 4.0)}, {"up", randn(rng, n, 30.0)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> y(n);
              kSituGluOp.ref(in[0].data(), in[1].data(), n, {4.0f, 25.0f}, y.data());
              return y;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kSituGluOp.bwd(in[0].data(), in[1].data(), n, {4.0f, 25.0f}, dy.data(), g[0].data(),
                             g[1].data());
            };
            return p;
          }};
}

std::vector<GradCase> elementwise_grads(int64_t n) {
  const std::string sh = dims({{"n", n}});
  std::vector<GradCase> v;
  v.push_back({"sigmoid", sh, 1e-4, [=](std::mt19937_64& rng) {
                 GradProblem p;
                 p.inputs = {{"x", randn(rng, n, 3.0)}};
                 p.forward = [=](const Tensors& in) {
                   std::vector<float> y(n);
                   kSigmoidOp.ref(in[0].data(), n, y.data());
                   return y;
                 };
                 p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
                   kSigmoidOp.bwd(in[0].data(), n, dy.data(), g[0].data());
                 };
                 return p;
               }});
  v.push_back({"scale", sh, 1e-4, [=](std::mt19937_64& rng) {
                 GradProblem p;
                 p.inputs = {{"x", randn(rng, n)}};
                 p.forward = [=](const Tensors& in) {
                   std::vector<float> y(n);
                   kScaleOp.ref(in[0].data(), n, -0.37f, y.data());
                   return y;
                 };
                 p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
                   kScaleOp.bwd(n, -0.37f, dy.data(), g[0].data());
                 };
                 return p;
               }});
  v.push_back({"add", sh, 1e-4, [=](std::mt19937_64& rng) {
                 GradProblem p;
                 p.inputs = {{"a", randn(rng, n)}, {"b", randn(rng, n)}};
                 p.forward = [=](const Tensors& in) {
                   std::vector<float> y(n);
                   kAddOp.ref(in[0].data(), in[1].data(), n, y.data());
                   return y;
                 };
                 p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
                   kAddOp.bwd(n, dy.data(), g[0].data(), g[1].data());
                 };
                 return p;
               }});
  v.push_back({"mul_sigmoid", sh, 1e-4, [=](std::mt19937_64& rng) {
                 GradProblem p;
                 p.inputs = {{"x", randn(rng, n, 2.0)}, {"gate", randn(rng, n, 3.0)}};
                 p.forward = [=](const Tensors& in) {
                   std::vector<float> y(n);
                   kMulSigmoidOp.ref(in[0].data(), in[1].data(), n, y.data());
                   return y;
                 };
                 p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
                   kMulSigmoidOp.bwd(in[0].data(), in[1].data(), n, dy.data(), g[0].data(),
                                     g[1].data());
                 };
                 return p;
               }});
  return v;
}

// src [n_src] copied through `s` into a destination of n_dst elements.
GradCase copy_grad(const std::string& name, CopyShape s, int64_t n_src, int64_t n_dst) {
  return {"copy", name, 1e-4, [=](std::mt19937_64& rng) {
            GradProblem p;
            p.inputs = {{"src", randn(rng, n_src)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> y(n_dst, 0.0f);
              kCopyOp.ref(in[0].data(), s, y.data());
              return y;
            };
            p.backward = [=](const Tensors&, const std::vector<float>& dy, Tensors& g) {
              kCopyOp.bwd(dy.data(), s, g[0].data());
            };
            return p;
          }};
}

std::vector<GradCase> copy_grads() {
  CopyShape transpose;  // [5, 3] -> [3, 5]
  transpose.shape[2] = 3, transpose.shape[3] = 5;
  transpose.src_stride[2] = 1, transpose.src_stride[3] = 3;
  transpose.dst_stride[2] = 5, transpose.dst_stride[3] = 1;
  CopyShape broadcast;  // r [4, 2] -> [4, 3 heads, 2] (head stride 0)
  broadcast.shape[1] = 4, broadcast.shape[2] = 3, broadcast.shape[3] = 2;
  broadcast.src_stride[1] = 2, broadcast.src_stride[2] = 0, broadcast.src_stride[3] = 1;
  broadcast.dst_stride[1] = 6, broadcast.dst_stride[2] = 2, broadcast.dst_stride[3] = 1;
  return {copy_grad("transpose 5x3", transpose, 15, 15),
          copy_grad("broadcast 4x2 to 4x3x2", broadcast, 8, 24)};
}

GradCase gather_grad(int64_t n_src, int64_t n, int64_t width) {
  return {"gather_rows", dims({{"src_rows", n_src}, {"n", n}, {"width", width}}), 1e-4,
          [=](std::mt19937_64& rng) {
            std::uniform_int_distribution<int64_t> pick(0, n_src - 1);
            std::vector<int64_t> rows(n);
            for (int64_t& r : rows) r = pick(rng);  // repeats allowed (an embedding lookup)
            GradProblem p;
            p.inputs = {{"src", randn(rng, n_src * width)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> y(n * width);
              kGatherRowsOp.ref(in[0].data(), rows.data(), n, width, y.data());
              return y;
            };
            p.backward = [=](const Tensors&, const std::vector<float>& dy, Tensors& g) {
              kGatherRowsOp.bwd(dy.data(), rows.data(), n, width, g[0].data());
            };
            return p;
          }};
}

GradCase gather_choice_grad(int64_t T, int64_t k, int64_t n, int64_t width) {
  return {"gather_choice_rows", dims({{"T", T}, {"k", k}, {"n", n}, {"width", width}}), 1e-4,
          [=](std::mt19937_64& rng) {
            const std::vector<int64_t> choice = rand_choices(rng, T, k, n);
            GradProblem p;
            p.inputs = {{"src", randn(rng, T * width)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> y(n * width);
              kGatherChoiceRowsOp.ref(in[0].data(), choice.data(), n, k, width, y.data());
              return y;
            };
            p.backward = [=](const Tensors&, const std::vector<float>& dy, Tensors& g) {
              kGatherChoiceRowsOp.bwd(dy.data(), choice.data(), n, k, width, g[0].data());
            };
            return p;
          }};
}

GradCase scatter_grad(int64_t T, int64_t k, int64_t n, int64_t width) {
  return {"moe_scatter_add", dims({{"T", T}, {"k", k}, {"n", n}, {"width", width}}), 1e-4,
          [=](std::mt19937_64& rng) {
            const std::vector<int64_t> choice = rand_choices(rng, T, k, n);
            const std::vector<float> c0 = randn(rng, T * width);
            GradProblem p;
            p.inputs = {{"y", randn(rng, n * width)}, {"weight", randu(rng, T * k, 0.1, 1.0)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> c = c0;
              kMoeScatterAddOp.ref(in[0].data(), choice.data(), in[1].data(), n, k, width,
                                   c.data());
              return c;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kMoeScatterAddOp.bwd(in[0].data(), choice.data(), in[1].data(), n, k, width,
                                   dy.data(), g[0].data(), g[1].data());
            };
            return p;
          }};
}

// Logits whose top-k (by biased score) has a clear margin, so no finite-difference step can
// change the selection; a changed selection poisons the output with NaN.
GradCase router_grad(RouterParams rp, int64_t T) {
  const std::string sh =
      dims({{"T", T}, {"E", rp.n_expert}, {"k", rp.top_k}, {"renorm", rp.renormalize}}) +
      " scale=" + std::to_string(rp.scale).substr(0, 3);
  return {"router", sh, 1e-4, [=](std::mt19937_64& rng) {
            const int64_t E = rp.n_expert, k = rp.top_k;
            const std::vector<float> bias = randn(rng, E, 0.1);
            std::vector<float> logits;
            for (int64_t t = 0; t < T; ++t) {
              for (;;) {
                std::vector<float> row = randn(rng, E, 2.0);
                std::vector<double> b(E);
                for (int64_t e = 0; e < E; ++e)
                  b[e] = 1 / (1 + std::exp(-double(row[e]))) + bias[e];
                std::sort(b.begin(), b.end(), std::greater<>());
                if (k == E || b[k - 1] - b[k] > 0.05) {
                  logits.insert(logits.end(), row.begin(), row.end());
                  break;
                }
              }
            }
            std::vector<int32_t> sel0(T * k);
            std::vector<float> w0(T * k);
            kRouterOp.ref(logits.data(), bias.data(), rp, T, sel0.data(), w0.data());
            GradProblem p;
            p.inputs = {{"logits", logits}};
            p.forward = [=](const Tensors& in) {
              std::vector<int32_t> sel(T * k);
              std::vector<float> w(T * k);
              kRouterOp.ref(in[0].data(), bias.data(), rp, T, sel.data(), w.data());
              for (size_t j = 0; j < w.size(); ++j) w[j] = sel[j] == sel0[j] ? w[j] : NAN;
              return w;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kRouterOp.bwd(in[0].data(), sel0.data(), rp, T, dy.data(), g[0].data());
            };
            return p;
          }};
}

GradCase cross_entropy_grad(int64_t T, int64_t V) {
  return {"cross_entropy", dims({{"T", T}, {"V", V}}), 1e-4, [=](std::mt19937_64& rng) {
            std::uniform_int_distribution<int64_t> pick(0, V - 1);
            std::vector<int64_t> targets(T);
            for (int64_t& t : targets) t = pick(rng);
            GradProblem p;
            p.inputs = {{"logits", randn(rng, T * V, 3.0)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> loss(T);
              kCrossEntropyOp.ref(in[0].data(), targets.data(), T, V, loss.data());
              return loss;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kCrossEntropyOp.bwd(in[0].data(), targets.data(), T, V, dy.data(), g[0].data());
            };
            return p;
          }};
}

std::vector<GradCase> all_cases() {
  std::vector<GradCase> v = {linear_grad(1, 1, 1),
                             linear_grad(3, 5, 7),
                             linear_grad(17, 9, 33),
                             rms_grad(1, 1),
                             rms_grad(3, 16),
                             rms_grad(5, 33),
                             gated_rms_grad(1, 2),
                             gated_rms_grad(4, 16),
                             l2_grad(1, 1),
                             l2_grad(4, 16),
                             l2_grad(3, 33),
                             situ_grad(1),
                             situ_grad(67),
                             gather_grad(5, 9, 3),
                             gather_grad(1, 1, 1),
                             gather_choice_grad(6, 2, 7, 5),
                             gather_choice_grad(1, 1, 1, 1),
                             scatter_grad(6, 2, 7, 5),
                             scatter_grad(1, 1, 1, 3),
                             router_grad({8, 2, true, 1.0f}, 5),
                             router_grad({4, 1, false, 2.5f}, 3),
                             router_grad({6, 6, true, 1.5f}, 2),
                             cross_entropy_grad(1, 2),
                             cross_entropy_grad(7, 50)};
  for (int64_t n : {1, 19}) {
    for (GradCase& c : elementwise_grads(n)) v.push_back(std::move(c));
  }
  for (GradCase& c : copy_grads()) v.push_back(std::move(c));
  return v;
}

RegisterGrad grads(all_cases());

}  // namespace
}  // namespace k3::test
