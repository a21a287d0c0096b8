// MLA absorbed vs expanded; AttnRes mix vs its double reference and its closed forms.
#include <gtest/gtest.h>

#include "ops/attn_res/attn_res.h"
#include "ops/harness.h"
#include "ops/mla/mla.h"

namespace k3::test {
namespace {

// Builds a latent cache and kv_b, expands them explicitly, and compares the absorbed
// attention (fast decode form) with the expanded one evaluated in double.
OpCase mla_case(MlaShape s) {
  std::string shape = "T=" + std::to_string(s.T) + " past=" + std::to_string(s.n_past) +
                      " H=" + std::to_string(s.H) + " Dn=" + std::to_string(s.Dn) +
                      " Dr=" + std::to_string(s.Dr) + " Dv=" + std::to_string(s.Dv) +
                      " Dc=" + std::to_string(s.Dc);
  return {"mla_absorbed_vs_expanded", shape, 1e-5, [=](std::mt19937_64& rng) {
            const int64_t S = s.n_past + s.T, Dq = s.Dn + s.Dr, Dcr = s.Dc + s.Dr;
            std::vector<float> q = randn(rng, s.T * s.H * Dq, 0.5);
            std::vector<float> cache = randn(rng, S * Dcr);
            std::vector<float> wkv = randn(rng, s.H * (s.Dn + s.Dv) * s.Dc, 1.0 / std::sqrt(s.Dc));
            Mat kv_b{s.H * (s.Dn + s.Dv), s.Dc, MatFormat::f32, wkv.data(), nullptr};
            std::vector<float> k(S * s.H * Dq), v(S * s.H * s.Dv);
            for (int64_t t = 0; t < S; ++t) {
              for (int64_t h = 0; h < s.H; ++h) {
                for (int64_t r = 0; r < s.Dn + s.Dv; ++r) {
                  double acc = 0;
                  for (int64_t c = 0; c < s.Dc; ++c)
                    acc += double(wkv[(h * (s.Dn + s.Dv) + r) * s.Dc + c]) * cache[t * Dcr + c];
                  if (r < s.Dn)
                    k[(t * s.H + h) * Dq + r] = float(acc);
                  else
                    v[(t * s.H + h) * s.Dv + r - s.Dn] = float(acc);
                }
                for (int64_t i = 0; i < s.Dr; ++i)
                  k[(t * s.H + h) * Dq + s.Dn + i] = cache[t * Dcr + s.Dc + i];
              }
            }
            std::vector<float> o(s.T * s.H * s.Dv), o_ref(o.size());
            mla_attention_absorbed(q.data(), cache.data(), kv_b, s, o.data());
            mla_attention_expanded(q.data(), k.data(), v.data(), s, o_ref.data());
            return Outputs{o, widen(o_ref)};
          }};
}

OpCase attn_res_case(int64_t n, int64_t T, int64_t d) {
  std::string shape =
      "n=" + std::to_string(n) + " T=" + std::to_string(T) + " d=" + std::to_string(d);
  return {"attn_res_mix", shape, 2e-6, [=](std::mt19937_64& rng) {
            std::vector<std::vector<float>> c;
            std::vector<const float*> p;
            for (int64_t i = 0; i < n; ++i) c.push_back(randn(rng, T * d, 1.0 + i));
            for (auto& x : c) p.push_back(x.data());
            std::vector<float> w = randn(rng, d, 2.0 / std::sqrt(d)), o(T * d), o_ref(T * d);
            attn_res_mix(p.data(), {n, T, d}, w.data(), 1e-5f, o.data());
            attn_res_mix_ref(p.data(), {n, T, d}, w.data(), 1e-5f, o_ref.data());
            return Outputs{o, widen(o_ref)};
          }};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  for (MlaShape s : {MlaShape{1, 0, 1, 8, 4, 8, 16},
                     {1, 9, 3, 16, 8, 16, 24},
                     {7, 0, 2, 16, 8, 12, 32},
                     {5, 4, 4, 8, 0, 8, 16},
                     {3, 2, 2, 32, 16, 32, 48}}) {
    v.push_back(mla_case(s));
  }
  for (auto [n, T, d] : {std::tuple{1, 1, 8}, {2, 3, 48}, {9, 5, 64}, {4, 1, 7168}}) {
    v.push_back(attn_res_case(n, T, d));
  }
  return v;
}

static Register reg(cases());

TEST(AttnRes, OneCandidateIsIdentity) {
  std::mt19937_64 rng(3);
  std::vector<float> x = randn(rng, 4 * 16), w = randn(rng, 16), o(4 * 16);
  const float* p[] = {x.data()};
  attn_res_mix(p, {1, 4, 16}, w.data(), 1e-5f, o.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(o[i], x[i], 1e-6f * std::fabs(x[i]) + 1e-7f);
}

TEST(AttnRes, EqualScoresGiveTheMeanOfRawCandidates) {
  // spec §11.4 item 3: with w = 0 every score is 0, so the mix is the plain mean.
  std::mt19937_64 rng(4);
  std::vector<float> a = randn(rng, 32), b = randn(rng, 32, 5.0), c = randn(rng, 32, 0.1);
  std::vector<float> w(32, 0.0f), o(32);
  const float* p[] = {a.data(), b.data(), c.data()};
  attn_res_mix(p, {3, 1, 32}, w.data(), 1e-5f, o.data());
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(o[i], (a[i] + b[i] + c[i]) / 3.0f, 1e-5f);
}

}  // namespace
}  // namespace k3::test
