// The training pass's device sequence ops (train/cuda/train_kda.cu) against the CPU ops they
// mirror, window by window from an empty history: the causal conv + SiLU (ops/conv1d) and the
// KDA recurrence (ops/kda: o and every saved state against kda_recurrent, the backward against
// kda_recurrent_bwd), on inputs as the layer produces them.
#if defined(K3_HAVE_CUDA)

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/conv1d/conv1d.h"
#include "ops/kda/kda.h"
#include "ops/norm/norm.h"
#include "train/cuda_test_util.h"

namespace k3::train::gpu::test {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- conv1d + SiLU ----------------------------------------------------------------------

struct ConvCase {
  int64_t B, T, C, W;
};

// T below, at and above the 64-token chunk of the taps' partial sums; T < W; W = 1 and 8.
const ConvCase kConvCases[] = {{1, 1, 5, 4},     {1, 2, 7, 1},   {3, 2, 16, 4},  {1, 1, 1, 1},
                               {2, 3, 9, 8},     {3, 63, 33, 4}, {2, 64, 8, 4},  {2, 200, 64, 4},
                               {1, 200, 130, 1}, {3, 70, 40, 3}, {2, 129, 24, 2}};

std::string name(const ConvCase& c) {
  return "B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " C=" + std::to_string(c.C) +
         " W=" + std::to_string(c.W);
}

// The CPU op on window b's rows of x [B·T, C] from a zero history.
void conv_cpu(const std::vector<float>& x, const std::vector<float>& w, const ConvCase& c,
              std::vector<float>& y) {
  for (int64_t b = 0; b < c.B; ++b) {
    std::vector<float> state(static_cast<size_t>(c.C * (c.W - 1) + 1), 0.0f);
    causal_conv1d_silu(x.data() + b * c.T * c.C, w.data(), state.data(), {c.T, c.C, c.W},
                       y.data() + b * c.T * c.C);
  }
}

TEST(TrainCudaConv, ForwardMatchesCpu) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(101);
  for (const ConvCase& c : kConvCases) {
    const int64_t n = c.B * c.T * c.C;
    const std::vector<float> x = random_vec(rng, n, -2.0f, 2.0f), w = random_vec(rng, c.C * c.W);
    auto dx = upload(x), dw = upload(w);
    auto dy = upload(random_vec(rng, n));  // overwritten
    conv1d_silu_fwd(dx.data(), dw.data(), c.B, c.T, c.C, c.W, dy.data());
    std::vector<float> want(static_cast<size_t>(n));
    conv_cpu(x, w, c, want);
    EXPECT_LE(rel_err(download(dy), want), 2e-5) << name(c);
  }
}

TEST(TrainCudaConv, BackwardMatchesCpu) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(103);
  for (const ConvCase& c : kConvCases) {
    const int64_t n = c.B * c.T * c.C;
    const std::vector<float> x = random_vec(rng, n, -2.0f, 2.0f), w = random_vec(rng, c.C * c.W),
                             dy = random_vec(rng, n);
    // Non-zero gradients: the backward adds.
    std::vector<float> gx = random_vec(rng, n), gw = random_vec(rng, c.C * c.W);
    auto d_x = upload(x), d_w = upload(w), d_dy = upload(dy), d_gx = upload(gx), d_gw = upload(gw);
    conv1d_silu_bwd(d_x.data(), d_w.data(), c.B, c.T, c.C, c.W, d_dy.data(), d_gx.data(),
                    d_gw.data());
    for (int64_t b = 0; b < c.B; ++b) {
      const int64_t off = b * c.T * c.C;
      causal_conv1d_silu_bwd(x.data() + off, w.data(), nullptr, {c.T, c.C, c.W}, dy.data() + off,
                             gx.data() + off, gw.data());
    }
    EXPECT_LE(rel_err(download(d_gx), gx), 2e-5) << name(c) << " dx";
    EXPECT_LE(rel_err(download(d_gw), gw), 2e-5) << name(c) << " dw";
  }
}

// dw is a sum over every row: the same bits on every run, and with dx skipped.
TEST(TrainCudaConv, BackwardIsDeterministic) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(107);
  const ConvCase c{3, 300, 96, 4};
  const int64_t n = c.B * c.T * c.C;
  auto x = upload(random_vec(rng, n)), w = upload(random_vec(rng, c.C * c.W)),
       dy = upload(random_vec(rng, n));
  const std::vector<float> gw0 = random_vec(rng, c.C * c.W);
  std::vector<std::vector<float>> dws;
  for (int run = 0; run < 3; ++run) {
    auto gx = upload(std::vector<float>(static_cast<size_t>(n), 0.5f)), gw = upload(gw0);
    conv1d_silu_bwd(x.data(), w.data(), c.B, c.T, c.C, c.W, dy.data(),
                    run == 2 ? nullptr : gx.data(), gw.data());
    dws.push_back(download(gw));
  }
  EXPECT_TRUE(same_bits(dws[0], dws[1]));
  EXPECT_TRUE(same_bits(dws[0], dws[2]));
}

// ---- KDA core ---------------------------------------------------------------------------

struct KdaCase {
  int64_t B, T, H, K, V;
};

// Degenerate lengths and sizes, K ≠ V both ways, V padded inside a warp (3, 20, 40) and across
// warps (48, 96), and every rows-per-thread count of the kernels (1 … 32).
const KdaCase kKdaCases[] = {{1, 1, 1, 8, 8},     {1, 2, 2, 8, 8},      {3, 2, 1, 32, 32},
                             {3, 63, 2, 32, 32},  {1, 200, 2, 32, 32},  {2, 200, 1, 64, 64},
                             {3, 17, 2, 16, 48},  {1, 63, 1, 48, 16},   {2, 5, 2, 1, 1},
                             {1, 9, 1, 5, 3},     {2, 31, 1, 24, 20},   {1, 20, 2, 16, 128},
                             {1, 25, 1, 64, 128}, {1, 40, 1, 128, 128}, {2, 30, 1, 100, 96},
                             {1, 12, 1, 128, 8},  {1, 33, 1, 128, 40}};

std::string name(const KdaCase& c) {
  return "B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) +
         " K=" + std::to_string(c.K) + " V=" + std::to_string(c.V);
}

struct KdaData {
  std::vector<float> q, k, v, g, beta;  // [B·T, H, …]
  // Rows [b·T + t0, b·T + t0 + n) as the CPU op's [n, H, …] inputs.
  KdaInputs rows(const KdaCase& c, int64_t b, int64_t t0) const {
    const int64_t r = (b * c.T + t0) * c.H;
    return {q.data() + r * c.K, k.data() + r * c.K, v.data() + r * c.V, g.data() + r * c.K,
            beta.data() + r};
  }
};

// As the layer produces them: unit k, unit q scaled by 1/√K, g in (−5, 0) mostly mild (the
// state then carries over many tokens), β in (0, 1).
KdaData make_kda(std::mt19937_64& rng, const KdaCase& c) {
  const int64_t rows = c.B * c.T * c.H;
  KdaData d;
  d.q = random_vec(rng, rows * c.K);
  d.k = random_vec(rng, rows * c.K);
  l2_norm(d.q.data(), rows, c.K, 1e-6f);
  l2_norm(d.k.data(), rows, c.K, 1e-6f);
  for (float& x : d.q) x /= std::sqrt(static_cast<float>(c.K));
  d.v = random_vec(rng, rows * c.V);
  d.g = random_vec(rng, rows * c.K, -5.0f, -1e-3f);
  for (float& x : d.g) x = x < -4.0f ? x : x * 0.05f;
  d.beta = random_vec(rng, rows, 0.05f, 0.95f);
  return d;
}

struct KdaDev {
  DevBuf q, k, v, g, beta;
  explicit KdaDev(const KdaData& d)
      : q(upload(d.q)), k(upload(d.k)), v(upload(d.v)), g(upload(d.g)), beta(upload(d.beta)) {}
};

int64_t states_size(const KdaCase& c) { return c.B * c.H * (c.T + 1) * c.K * c.V; }

TEST(TrainCudaKda, CoreForwardMatchesCpu) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(211);
  for (const KdaCase& c : kKdaCases) {
    const KdaData d = make_kda(rng, c);
    const KdaDev dev(d);
    const int64_t HKV = c.H * c.K * c.V, KV = c.K * c.V;
    // Both outputs start as garbage: every element (S_0 included) must be written.
    auto states = upload(random_vec(rng, states_size(c)));
    auto o = upload(random_vec(rng, c.B * c.T * c.H * c.V));
    kda_core_fwd(dev.q.data(), dev.k.data(), dev.v.data(), dev.g.data(), dev.beta.data(), c.B, c.T,
                 c.H, c.K, c.V, states.data(), o.data());
    std::vector<float> o_want(static_cast<size_t>(c.B * c.T * c.H * c.V));
    std::vector<float> S_T(static_cast<size_t>(c.B * HKV)), S_T_want(S_T.size(), 0.0f);
    std::vector<float> states_want(static_cast<size_t>(states_size(c)), 0.0f);
    const std::vector<float> states_got = download(states);
    for (int64_t b = 0; b < c.B; ++b) {
      // The whole window at once: o and the final state.
      kda_recurrent(d.rows(c, b, 0), {c.T, c.H, c.K, c.V}, S_T_want.data() + b * HKV,
                    o_want.data() + b * c.T * c.H * c.V);
      // Token by token: every state S_t the backward will read.
      std::vector<float> S(static_cast<size_t>(HKV), 0.0f), o1(static_cast<size_t>(c.H * c.V));
      for (int64_t t = 0; t < c.T; ++t) {
        kda_recurrent(d.rows(c, b, t), {1, c.H, c.K, c.V}, S.data(), o1.data());
        for (int64_t h = 0; h < c.H; ++h) {
          const float* src = S.data() + h * KV;
          std::copy(src, src + KV, states_want.begin() + ((b * c.H + h) * (c.T + 1) + t + 1) * KV);
        }
      }
      for (int64_t h = 0; h < c.H; ++h) {
        const float* src = states_got.data() + ((b * c.H + h) * (c.T + 1) + c.T) * KV;
        std::copy(src, src + KV, S_T.begin() + (b * c.H + h) * KV);
      }
    }
    EXPECT_LE(rel_err(download(o), o_want), 1e-4) << name(c) << " o";
    EXPECT_LE(rel_err(S_T, S_T_want), 1e-4) << name(c) << " S_T";
    EXPECT_LE(rel_err(states_got, states_want), 1e-4) << name(c) << " states";
  }
}

// The GPU gradients [q, k, v, g, beta] after kda_core_bwd from `init`, the forward run first.
std::vector<std::vector<float>> gpu_bwd(const KdaDev& dev, const KdaCase& c, const DevBuf& d_o,
                                        const std::vector<std::vector<float>>& init) {
  DevBuf states(states_size(c)), o(c.B * c.T * c.H * c.V);
  kda_core_fwd(dev.q.data(), dev.k.data(), dev.v.data(), dev.g.data(), dev.beta.data(), c.B, c.T,
               c.H, c.K, c.V, states.data(), o.data());
  std::vector<DevBuf> grads;
  for (const std::vector<float>& x : init) grads.push_back(upload(x));
  kda_core_bwd(dev.q.data(), dev.k.data(), dev.v.data(), dev.g.data(), dev.beta.data(), c.B, c.T,
               c.H, c.K, c.V, states.data(), d_o.data(), grads[0].data(), grads[1].data(),
               grads[2].data(), grads[3].data(), grads[4].data());
  std::vector<std::vector<float>> out;
  for (const DevBuf& x : grads) out.push_back(download(x));
  return out;
}

std::vector<std::vector<float>> random_grads(std::mt19937_64& rng, const KdaData& d) {
  return {random_vec(rng, static_cast<int64_t>(d.q.size())),
          random_vec(rng, static_cast<int64_t>(d.k.size())),
          random_vec(rng, static_cast<int64_t>(d.v.size())),
          random_vec(rng, static_cast<int64_t>(d.g.size())),
          random_vec(rng, static_cast<int64_t>(d.beta.size()))};
}

TEST(TrainCudaKda, CoreBackwardMatchesCpu) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(223);
  const char* const kNames[] = {"dq", "dk", "dv", "dg", "dbeta"};
  for (const KdaCase& c : kKdaCases) {
    const KdaData d = make_kda(rng, c);
    const KdaDev dev(d);
    const std::vector<float> d_o = random_vec(rng, c.B * c.T * c.H * c.V);
    // Non-zero gradients: the backward adds.
    std::vector<std::vector<float>> want = random_grads(rng, d);
    const std::vector<std::vector<float>> got = gpu_bwd(dev, c, upload(d_o), want);
    for (int64_t b = 0; b < c.B; ++b) {
      const int64_t r = b * c.T * c.H;  // the window's first row of [B·T, H, …]
      const KdaGrads gr{want[0].data() + r * c.K, want[1].data() + r * c.K,
                        want[2].data() + r * c.V, want[3].data() + r * c.K, want[4].data() + r};
      kda_recurrent_bwd(d.rows(c, b, 0), {c.T, c.H, c.K, c.V}, nullptr, d_o.data() + r * c.V, gr);
    }
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_LE(rel_err(got[i], want[i]), 1e-4) << name(c) << " " << kNames[i];
  }
}

// Every sum runs in a fixed order inside one block: the same bits on every run.
TEST(TrainCudaKda, CoreBackwardIsDeterministic) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(227);
  for (const KdaCase& c : {KdaCase{2, 150, 2, 64, 64}, KdaCase{1, 60, 1, 128, 96}}) {
    const KdaData d = make_kda(rng, c);
    const KdaDev dev(d);
    const DevBuf d_o = upload(random_vec(rng, c.B * c.T * c.H * c.V));
    const std::vector<std::vector<float>> init = random_grads(rng, d);
    const auto a = gpu_bwd(dev, c, d_o, init), b = gpu_bwd(dev, c, d_o, init);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i], b[i])) << name(c) << " " << i;
  }
}

TEST(TrainCudaKda, RejectsUnsupportedSizes) {
  K3_SKIP_WITHOUT_GPU();
  float* none = nullptr;
  EXPECT_THROW(kda_core_fwd(none, none, none, none, none, 1, 4, 1, 256, 32, none, none), Error);
  EXPECT_THROW(kda_core_fwd(none, none, none, none, none, 1, 4, 1, 32, 129, none, none), Error);
  EXPECT_THROW(kda_core_bwd(none, none, none, none, none, 1, 4, 1, 0, 32, none, none, none, none,
                            none, none, none),
               Error);
  EXPECT_THROW(conv1d_silu_bwd(none, none, 1, 4, 8, 9, none, none, none), Error);
}

}  // namespace
}  // namespace k3::train::gpu::test

#endif  // K3_HAVE_CUDA
