// KDA: the chunked and recurrent forms against the double recurrence (T = 1, T not a multiple
// of the chunk, several chunks, a non-zero initial state); the short conv against its
// reference, also when the sequence is fed in pieces.
#include <gtest/gtest.h>

#include <memory>

#include "ops/conv1d/conv1d.h"
#include "ops/harness.h"
#include "ops/kda/kda.h"
#include "ops/norm/norm.h"

namespace k3::test {
namespace {

struct KdaData {
  std::vector<float> q, k, v, g, beta, S0;
  KdaInputs in() const { return {q.data(), k.data(), v.data(), g.data(), beta.data()}; }
};

// Inputs as the layer produces them: L2-normalised q (scaled) and k, g ∈ (−5, 0), β ∈ (0, 1).
KdaData kda_data(std::mt19937_64& rng, KdaShape s) {
  KdaData d;
  d.q = randn(rng, s.T * s.H * s.K);
  d.k = randn(rng, s.T * s.H * s.K);
  l2_norm(d.q.data(), s.T * s.H, s.K, 1e-6f);
  l2_norm(d.k.data(), s.T * s.H, s.K, 1e-6f);
  for (float& x : d.q) x /= std::sqrt(static_cast<float>(s.K));
  d.v = randn(rng, s.T * s.H * s.V);
  d.g = randu(rng, s.T * s.H * s.K, -5.0, -1e-3);
  // Mostly mild decays, as trained models have; some channels near the lower bound.
  for (float& x : d.g) x = x < -4.0f ? x : x * 0.05f;
  d.beta = randu(rng, s.T * s.H, 0.05, 0.95);
  d.S0 = randn(rng, s.H * s.K * s.V, 0.3);
  return d;
}

// Output and final state, concatenated.
OpCase kda_case(const char* op, KdaShape s, int64_t chunk, bool chunked) {
  std::string shape = "T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
                      " K=" + std::to_string(s.K) + " V=" + std::to_string(s.V) +
                      " C=" + std::to_string(chunk);
  return {op, shape, 2e-5, [=](std::mt19937_64& rng) {
            KdaData d = kda_data(rng, s);
            std::vector<float> o(s.T * s.H * s.V), S = d.S0;
            if (chunked) {
              kda_chunked(d.in(), s, S.data(), o.data(), chunk);
            } else {
              kda_recurrent(d.in(), s, S.data(), o.data());
            }
            std::vector<float> o_ref(o.size()), S_ref = d.S0;
            kda_recurrent_ref(d.in(), s, S_ref.data(), o_ref.data());
            o.insert(o.end(), S.begin(), S.end());
            o_ref.insert(o_ref.end(), S_ref.begin(), S_ref.end());
            return Outputs{o, widen(o_ref)};
          }};
}

OpCase conv_case(int64_t T, int64_t C, int64_t W, int64_t split) {
  std::string shape = "T=" + std::to_string(T) + " C=" + std::to_string(C) +
                      " W=" + std::to_string(W) + " split=" + std::to_string(split);
  return {"conv1d_silu", shape, 1e-6, [=](std::mt19937_64& rng) {
            std::vector<float> x = randn(rng, T * C), w = randn(rng, C * W, 0.5);
            std::vector<float> st0 = randn(rng, C * (W - 1));
            std::vector<float> st = st0, st_ref = st0, y(T * C), y_ref(T * C);
            // The fast version sees the sequence in two pieces; the reference in one.
            causal_conv1d_silu(x.data(), w.data(), st.data(), {split, C, W}, y.data());
            causal_conv1d_silu(x.data() + split * C, w.data(), st.data(), {T - split, C, W},
                               y.data() + split * C);
            causal_conv1d_silu_ref(x.data(), w.data(), st_ref.data(), {T, C, W}, y_ref.data());
            y.insert(y.end(), st.begin(), st.end());
            y_ref.insert(y_ref.end(), st_ref.begin(), st_ref.end());
            return Outputs{y, widen(y_ref)};
          }};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  for (KdaShape s : {KdaShape{1, 1, 8, 8},
                     {1, 3, 16, 16},
                     {63, 2, 16, 16},
                     {64, 2, 16, 16},
                     {65, 2, 16, 8},
                     {130, 3, 32, 32},
                     {200, 1, 16, 24}}) {
    v.push_back(kda_case("kda_chunked", s, 64, true));
    v.push_back(kda_case("kda_recurrent", s, 64, false));
  }
  v.push_back(kda_case("kda_chunked", {37, 2, 16, 16}, 1, true));   // chunk of one token
  v.push_back(kda_case("kda_chunked", {37, 2, 16, 16}, 16, true));  // odd tail
  for (auto [T, C, W, split] :
       {std::tuple{1, 5, 4, 0}, {9, 12, 4, 4}, {20, 7, 2, 19}, {33, 64, 4, 1}, {6, 3, 1, 3}}) {
    v.push_back(conv_case(T, C, W, split));
  }
  return v;
}

static Register reg(cases());

// Release shapes: 96 heads x 128, one prefill chunk (chunked) and one decode step (recurrent).
PerfCase kda_perf(KdaShape s, bool chunked) {
  const double state_bytes = 4.0 * s.H * s.K * s.V;
  const double flops =
      chunked ? s.H * (4.0 * s.T * s.T * s.K + 6.0 * s.T * s.K * s.V) : s.T * s.H * 8.0 * s.K * s.V;
  std::string shape = "T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
                      " K=" + std::to_string(s.K) + " V=" + std::to_string(s.V);
  return {chunked ? "kda_chunked" : "kda_recurrent", shape, flops, state_bytes,
          [=](std::mt19937_64& rng) -> std::function<void()> {
            auto d = std::make_shared<KdaData>(kda_data(rng, s));
            auto o = std::make_shared<std::vector<float>>(s.T * s.H * s.V);
            auto S = std::make_shared<std::vector<float>>(d->S0);
            return [=] {
              if (chunked) {
                kda_chunked(d->in(), s, S->data(), o->data());
              } else {
                kda_recurrent(d->in(), s, S->data(), o->data());
              }
            };
          }};
}

static RegisterPerf perf({kda_perf({64, 96, 128, 128}, true), kda_perf({1, 96, 128, 128}, false)});

}  // namespace
}  // namespace k3::test
