// Gradient checks (grad mode, grad_harness.h) of the attention-side ops: the causal conv +
// SiLU, the KDA gate and recurrence, MLA's expanded attention and the AttnRes mix.
#include <cmath>
#include <string>

#include "ops/attn_res/attn_res.h"
#include "ops/conv1d/conv1d.h"
#include "ops/grad_harness.h"
#include "ops/harness.h"
#include "ops/kda/kda.h"
#include "ops/kda/kda_gate.h"
#include "ops/mla/mla.h"

namespace k3::test {
namespace {

// `with_history`: the sequence continues a non-zero conv history (not differentiated).
GradCase conv_grad(int64_t T, int64_t C, int64_t W, bool with_history) {
  const std::string sh = "T=" + std::to_string(T) + " C=" + std::to_string(C) +
                         " W=" + std::to_string(W) + (with_history ? " history" : " fresh");
  return {"conv1d_silu", sh, 1e-4, [=](std::mt19937_64& rng) {
            const std::vector<float> hist = randn(rng, C * (W - 1));
            const float* h0 = with_history ? hist.data() : nullptr;
            GradProblem p;
            p.inputs = {{"x", randn(rng, T * C)}, {"w", randn(rng, C * W, 0.5)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> st = with_history ? hist : std::vector<float>(C * (W - 1), 0.0f);
              std::vector<float> y(T * C);
              kConv1dSiluOp.ref(in[0].data(), in[1].data(), st.data(), {T, C, W}, y.data());
              return y;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kConv1dSiluOp.bwd(in[0].data(), in[1].data(), with_history ? hist.data() : h0,
                                {T, C, W}, dy.data(), g[0].data(), g[1].data());
            };
            return p;
          }};
}

// Unit-norm random rows [rows, n] scaled by s (KDA's q and k arrive L2-normalised).
std::vector<float> unit_rows(std::mt19937_64& rng, int64_t rows, int64_t n, double s) {
  std::vector<float> v = randn(rng, rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(v[r * n + i]) * v[r * n + i];
    for (int64_t i = 0; i < n; ++i)
      v[r * n + i] = static_cast<float>(v[r * n + i] * s / std::sqrt(ss));
  }
  return v;
}

// `from_state`: starts from a non-zero state S0 (not differentiated). `chunk` > 0 checks the
// chunked backward with that chunk length (64: the registered one); 0 the recurrent one.
// Gates are drawn in (g_lo, −0.02); a strong g_lo drives the chunk's cumulative decay past
// the range where the chunked backward splits e^{Γ_r−Γ_s} into two factors.
GradCase kda_grad(KdaShape s, bool from_state, int64_t chunk = 0, double g_lo = -1.5) {
  const std::string sh =
      "T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) + " K=" + std::to_string(s.K) +
      " V=" + std::to_string(s.V) + (from_state ? " S0" : " fresh") +
      (chunk ? " C=" + std::to_string(chunk) : "") + (g_lo < -1.5 ? " strong decay" : "");
  return {
      chunk ? "kda_chunked" : "kda_recurrent", sh, 1e-4, [=](std::mt19937_64& rng) {
        const int64_t T = s.T, H = s.H, K = s.K, V = s.V;
        const std::vector<float> S0 =
            from_state ? randn(rng, H * K * V, 0.5) : std::vector<float>(H * K * V, 0.0f);
        GradProblem p;
        p.inputs = {{"q", unit_rows(rng, T * H, K, 1.0 / std::sqrt(double(K)))},
                    {"k", unit_rows(rng, T * H, K, 1.0)},
                    {"v", randn(rng, T * H * V)},
                    // A strong decay's finite differences need a finer step (the output
                    // varies as e^{Γ}, Γ in the hundreds).
                    {"g", randu(rng, T * H * K, g_lo, -0.02), g_lo < -1.5 ? 1e-3 : 3e-2},
                    {"beta", randu(rng, T * H, 0.05, 0.95)}};
        auto inputs = [](const Tensors& in) {
          return KdaInputs{in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data()};
        };
        p.forward = [=](const Tensors& in) {
          std::vector<float> S = S0, o(T * H * V);
          kKdaRecurrentOp.ref(inputs(in), s, S.data(), o.data());
          return o;
        };
        p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
          const KdaGrads d{g[0].data(), g[1].data(), g[2].data(), g[3].data(), g[4].data()};
          const float* s0 = from_state ? S0.data() : nullptr;
          if (chunk == 64) {
            kKdaChunkedOp.bwd(inputs(in), s, s0, dy.data(), d);
          } else if (chunk > 0) {
            kda_chunked_bwd(inputs(in), s, s0, dy.data(), d, chunk);
          } else {
            kKdaRecurrentOp.bwd(inputs(in), s, s0, dy.data(), d);
          }
        };
        return p;
      }};
}

GradCase kda_gate_grad(int64_t T, int64_t H, int64_t K) {
  const std::string sh =
      "T=" + std::to_string(T) + " H=" + std::to_string(H) + " K=" + std::to_string(K);
  return {"kda_gate", sh, 1e-4, [=](std::mt19937_64& rng) {
            const KdaGateShape s{T, H, K, -5.0f};
            GradProblem p;
            p.inputs = {{"f", randn(rng, T * H * K)},
                        {"A_log", randu(rng, H, -1.0, 0.5)},
                        {"dt_bias", randn(rng, H * K, 0.5)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> g(T * H * K);
              kKdaGateOp.ref(in[0].data(), in[1].data(), in[2].data(), s, g.data());
              return g;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kKdaGateOp.bwd(in[0].data(), in[1].data(), in[2].data(), s, dy.data(), g[0].data(),
                             g[1].data(), g[2].data());
            };
            return p;
          }};
}

GradCase mla_grad(MlaShape s) {
  const std::string sh = "T=" + std::to_string(s.T) + " past=" + std::to_string(s.n_past) +
                         " H=" + std::to_string(s.H) + " Dn=" + std::to_string(s.Dn) +
                         " Dr=" + std::to_string(s.Dr) + " Dv=" + std::to_string(s.Dv);
  return {"mla_expanded", sh, 1e-4, [=](std::mt19937_64& rng) {
            const int64_t S = s.n_past + s.T, Dq = s.Dn + s.Dr;
            GradProblem p;
            p.inputs = {{"q", randn(rng, s.T * s.H * Dq, 0.7)},
                        {"k", randn(rng, S * s.H * Dq, 0.7)},
                        {"v", randn(rng, S * s.H * s.Dv)}};
            p.forward = [=](const Tensors& in) {
              std::vector<float> o(s.T * s.H * s.Dv);
              kMlaExpandedOp.ref(in[0].data(), in[1].data(), in[2].data(), s, o.data());
              return o;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              kMlaExpandedOp.bwd(in[0].data(), in[1].data(), in[2].data(), s, dy.data(),
                                 g[0].data(), g[1].data(), g[2].data());
            };
            return p;
          }};
}

GradCase attn_res_grad(int64_t n, int64_t T, int64_t d) {
  const std::string sh =
      "n=" + std::to_string(n) + " T=" + std::to_string(T) + " d=" + std::to_string(d);
  return {"attn_res_mix", sh, 1e-4, [=](std::mt19937_64& rng) {
            GradProblem p;
            for (int64_t i = 0; i < n; ++i) {
              p.inputs.push_back({"v" + std::to_string(i), randn(rng, T * d, 1.0 + 0.5 * i)});
            }
            // Mix weights small enough that no candidate's softmax weight is negligible (the
            // regime training starts in), so every candidate's gradient is resolved.
            p.inputs.push_back({"w", randn(rng, d, 0.3)});
            auto cands = [=](const Tensors& in) {
              std::vector<const float*> c;
              for (int64_t i = 0; i < n; ++i) c.push_back(in[i].data());
              return c;
            };
            p.forward = [=](const Tensors& in) {
              std::vector<float> out(T * d);
              kAttnResMixOp.ref(cands(in).data(), {n, T, d}, in[n].data(), 1e-5f, out.data());
              return out;
            };
            p.backward = [=](const Tensors& in, const std::vector<float>& dy, Tensors& g) {
              std::vector<float*> dc;
              for (int64_t i = 0; i < n; ++i) dc.push_back(g[i].data());
              kAttnResMixOp.bwd(cands(in).data(), {n, T, d}, in[n].data(), 1e-5f, dy.data(),
                                dc.data(), g[n].data());
            };
            return p;
          }};
}

RegisterGrad grads({
    conv_grad(1, 1, 4, false),
    conv_grad(7, 3, 4, true),
    conv_grad(13, 5, 2, false),
    conv_grad(20, 37, 4, true),
    kda_grad({1, 1, 4, 4}, false),
    kda_grad({9, 2, 8, 6}, true),
    kda_grad({24, 1, 16, 16}, false),
    kda_grad({1, 1, 4, 4}, false, 64),
    kda_grad({9, 2, 8, 6}, true, 4),
    kda_grad({13, 1, 6, 5}, true, 5),
    kda_grad({24, 1, 16, 16}, false, 7),
    kda_grad({70, 1, 4, 6}, true, 64),
    kda_grad({70, 1, 4, 6}, true, 64, -30.0),  // |Γ| > 600 in chunk 1, not in chunk 2
    kda_gate_grad(1, 1, 1),
    kda_gate_grad(5, 2, 8),
    mla_grad({1, 0, 1, 2, 1, 2, 0}),
    mla_grad({7, 0, 2, 8, 4, 8, 0}),
    mla_grad({5, 3, 2, 4, 4, 4, 0}),
    mla_grad({37, 6, 2, 16, 8, 20, 0}),  // past every GEMM tile edge
    attn_res_grad(1, 3, 8),
    attn_res_grad(2, 4, 16),
    attn_res_grad(4, 3, 33),
});

}  // namespace
}  // namespace k3::test
