// The device attention, AttnRes mix, router and routed-experts combine of the training pass
// (train/cuda/train_attn.cu) against the CPU ops they mirror, on random inputs over many shapes
// (degenerate ones included), with non-zero initial gradients to check that the backwards add.
#if defined(K3_HAVE_CUDA)

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "ops/attn_res/attn_res.h"
#include "ops/mla/mla.h"
#include "ops/moe/moe_combine.h"
#include "ops/moe/router.h"
#include "train/cuda_test_util.h"

namespace k3::train::gpu::test {
namespace {

constexpr double kTol = 2e-5;

// ---- attention ---------------------------------------------------------------------------

struct AttnCase {
  int64_t B, T, H, Dn, Dr, Dv;
};

// The softmax probabilities [B, H, T, T] in double, zero above the diagonal.
std::vector<float> reference_probs(const std::vector<float>& q, const std::vector<float>& k,
                                   const AttnCase& c) {
  const int64_t Dq = c.Dn + c.Dr, T = c.T, H = c.H;
  const double scale = 1.0 / std::sqrt(double(Dq));
  std::vector<float> probs(static_cast<size_t>(c.B * H * T * T), 0.0f);
  std::vector<double> s(static_cast<size_t>(T));
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        const float* qt = q.data() + ((b * T + t) * H + h) * Dq;
        double mx = -INFINITY, sum = 0;
        for (int64_t u = 0; u <= t; ++u) {
          const float* ku = k.data() + ((b * T + u) * H + h) * Dq;
          double dot = 0;
          for (int64_t i = 0; i < Dq; ++i) dot += double(qt[i]) * ku[i];
          s[u] = dot * scale;
          mx = std::max(mx, s[u]);
        }
        for (int64_t u = 0; u <= t; ++u) sum += (s[u] = std::exp(s[u] - mx));
        float* row = probs.data() + ((b * H + h) * T + t) * T;
        for (int64_t u = 0; u <= t; ++u) row[u] = static_cast<float>(s[u] / sum);
      }
    }
  }
  return probs;
}

// Forward and backward of one shape against the CPU op run window by window.
void check_attention(const AttnCase& c, uint64_t seed, double bwd_tol) {
  SCOPED_TRACE(::testing::Message() << "B " << c.B << " T " << c.T << " H " << c.H << " Dn " << c.Dn
                                    << " Dr " << c.Dr << " Dv " << c.Dv);
  std::mt19937_64 rng(seed);
  const int64_t Dq = c.Dn + c.Dr, rows = c.B * c.T;
  const int64_t nq = rows * c.H * Dq, nv = rows * c.H * c.Dv;
  const std::vector<float> q = random_vec(rng, nq), k = random_vec(rng, nq),
                           v = random_vec(rng, nv), d_o = random_vec(rng, nv);
  const std::vector<float> dq0 = random_vec(rng, nq), dk0 = random_vec(rng, nq),
                           dv0 = random_vec(rng, nv);

  // CPU, per window (n_past = 0). Dc is not used by the expanded form.
  const MlaShape shape{c.T, 0, c.H, c.Dn, c.Dr, c.Dv, 0};
  std::vector<float> o_ref(static_cast<size_t>(nv)), dq_ref = dq0, dk_ref = dk0, dv_ref = dv0;
  for (int64_t b = 0; b < c.B; ++b) {
    const int64_t oq = b * c.T * c.H * Dq, ov = b * c.T * c.H * c.Dv;
    mla_attention_expanded(q.data() + oq, k.data() + oq, v.data() + ov, shape, o_ref.data() + ov);
    mla_attention_expanded_bwd(q.data() + oq, k.data() + oq, v.data() + ov, shape, d_o.data() + ov,
                               dq_ref.data() + oq, dk_ref.data() + oq, dv_ref.data() + ov);
  }

  const DevBuf dq_d = upload(q), dk_d = upload(k), dv_d = upload(v), ddo = upload(d_o);
  DevBuf probs(c.B * c.H * c.T * c.T), o(nv);
  mla_attention_fwd(dq_d.data(), dk_d.data(), dv_d.data(), c.B, c.T, c.H, Dq, c.Dv, probs.data(),
                    o.data());
  EXPECT_LE(rel_err(download(o), o_ref), kTol);
  const std::vector<float> p = download(probs), p_ref = reference_probs(q, k, c);
  EXPECT_LE(rel_err(p, p_ref), kTol);
  int64_t nonzero_above = 0;  // must be exact zeros
  for (int64_t r = 0; r < c.B * c.H * c.T; ++r)
    for (int64_t u = r % c.T + 1; u < c.T; ++u) nonzero_above += p[r * c.T + u] != 0.0f;
  EXPECT_EQ(nonzero_above, 0);

  DevBuf gq = upload(dq0), gk = upload(dk0), gv = upload(dv0);
  mla_attention_bwd(dq_d.data(), dk_d.data(), dv_d.data(), probs.data(), c.B, c.T, c.H, Dq, c.Dv,
                    ddo.data(), gq.data(), gk.data(), gv.data());
  EXPECT_LE(rel_err(download(gq), dq_ref), bwd_tol);
  EXPECT_LE(rel_err(download(gk), dk_ref), bwd_tol);
  EXPECT_LE(rel_err(download(gv), dv_ref), bwd_tol);
}

TEST(TrainCudaAttn, MlaAttentionMatchesCpu) {
  K3_SKIP_WITHOUT_GPU();
  uint64_t seed = 1;
  for (int64_t T : {1, 2, 65, 130})
    for (int64_t B : {1, 3})
      for (int64_t H : {1, 4})
        for (int64_t Dv : {32, 24}) check_attention({B, T, H, 32, 16, Dv}, seed++, kTol);
}

TEST(TrainCudaAttn, MlaAttentionLargeHeadsMatchCpu) {
  K3_SKIP_WITHOUT_GPU();
  check_attention({1, 200, 2, 128, 64, 128}, 101, kTol);  // Dq 192, Dv 128: the widest heads
  check_attention({2, 97, 3, 16, 0, 16}, 102, kTol);      // Dq 16, no rope part
}

TEST(TrainCudaAttn, MlaAttentionLongRowsMatchCpu) {
  K3_SKIP_WITHOUT_GPU();
  // dk and dv sum over up to T queries and dq over up to T keys, in fp32 on both sides in
  // different orders (tiles here, the CPU GEMM's blocking there): the rounding differences
  // grow with the row length, hence 1e-4 for the backward at T ≥ 512.
  check_attention({1, 700, 2, 32, 16, 24}, 201, 1e-4);
  check_attention({2, 1030, 1, 64, 16, 32}, 202, 1e-4);
}

TEST(TrainCudaAttn, MlaAttentionIsDeterministic) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(7);
  const int64_t B = 2, T = 150, H = 3, Dq = 48, Dv = 32, nq = B * T * H * Dq, nv = B * T * H * Dv;
  const DevBuf q = upload(random_vec(rng, nq)), k = upload(random_vec(rng, nq)),
               v = upload(random_vec(rng, nv)), d_o = upload(random_vec(rng, nv));
  std::vector<float> first[4];
  for (int run = 0; run < 2; ++run) {
    DevBuf probs(B * H * T * T), o(nv), dq(nq), dk(nq), dv(nv);
    mla_attention_fwd(q.data(), k.data(), v.data(), B, T, H, Dq, Dv, probs.data(), o.data());
    mla_attention_bwd(q.data(), k.data(), v.data(), probs.data(), B, T, H, Dq, Dv, d_o.data(),
                      dq.data(), dk.data(), dv.data());
    const std::vector<float> got[4] = {download(o), download(dq), download(dk), download(dv)};
    for (int i = 0; i < 4; ++i) {
      if (run == 0)
        first[i] = got[i];
      else
        EXPECT_EQ(got[i], first[i]) << "output " << i;
    }
  }
}

// ---- AttnRes mix -------------------------------------------------------------------------

void check_attn_res(int64_t n, int64_t rows, int64_t d, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " rows " << rows << " d " << d);
  std::mt19937_64 rng(seed);
  const int64_t m = rows * d;
  const float eps = 1e-6f;
  std::vector<std::vector<float>> cands, dcands;
  for (int64_t i = 0; i < n; ++i) {  // candidates of different magnitudes
    const float amp = 0.5f + static_cast<float>(i);
    cands.push_back(random_vec(rng, m, -amp, amp));
    dcands.push_back(random_vec(rng, m));
  }
  const std::vector<float> w = random_vec(rng, d), dout = random_vec(rng, m),
                           dw0 = random_vec(rng, d);
  const bool skip_first = n > 1;  // a null gradient entry: that candidate left out

  std::vector<const float*> c_ptr;
  std::vector<float*> dc_ptr;
  std::vector<std::vector<float>> dc_ref = dcands;
  for (int64_t i = 0; i < n; ++i) {
    c_ptr.push_back(cands[i].data());
    dc_ptr.push_back(skip_first && i == 0 ? nullptr : dc_ref[i].data());
  }
  std::vector<float> out_ref(static_cast<size_t>(m)), dw_ref = dw0;
  const AttnResShape s{n, rows, d};
  attn_res_mix(c_ptr.data(), s, w.data(), eps, out_ref.data());
  attn_res_mix_bwd(c_ptr.data(), s, w.data(), eps, dout.data(), dc_ptr.data(), dw_ref.data());

  std::vector<DevBuf> cd, dcd;
  std::vector<const float*> cd_ptr;
  std::vector<float*> dcd_ptr;
  for (int64_t i = 0; i < n; ++i) {
    cd.push_back(upload(cands[i]));
    dcd.push_back(upload(dcands[i]));
    cd_ptr.push_back(cd.back().data());
    dcd_ptr.push_back(skip_first && i == 0 ? nullptr : dcd.back().data());
  }
  const DevBuf wd = upload(w), doutd = upload(dout);
  DevBuf out(m), dw = upload(dw0);
  attn_res_mix_fwd(cd_ptr.data(), n, rows, d, wd.data(), eps, out.data());
  EXPECT_LE(rel_err(download(out), out_ref), kTol);
  attn_res_mix_bwd(cd_ptr.data(), n, rows, d, wd.data(), eps, doutd.data(), dcd_ptr.data(),
                   dw.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_LE(rel_err(download(dcd[i]), dc_ref[i]), kTol) << i;
  EXPECT_LE(rel_err(download(dw), dw_ref), kTol);
}

TEST(TrainCudaAttn, AttnResMixMatchesCpu) {
  K3_SKIP_WITHOUT_GPU();
  uint64_t seed = 300;
  for (int64_t n : {1, 2, 3})
    for (int64_t d : {1, 7, 256})
      for (int64_t rows : {1, 37}) check_attn_res(n, rows, d, seed++);
  check_attn_res(40, 5, 7, seed++);  // more candidates than its 32-thread blocks have threads
}

// ---- router ------------------------------------------------------------------------------

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Whether every pair of the token's biased scores is an exact tie or clearly apart (so both
// sides select the same experts whatever their last-bit differences in the sigmoid).
bool well_separated(const float* logits, const std::vector<float>& bias) {
  const int64_t E = static_cast<int64_t>(bias.size());
  for (int64_t a = 0; a < E; ++a) {
    for (int64_t b = a + 1; b < E; ++b) {
      const float va = sigmoid(logits[a]) + bias[a], vb = sigmoid(logits[b]) + bias[b];
      if (va != vb && std::fabs(va - vb) < 1e-4f) return false;
    }
  }
  return true;
}

// Random logits and biases; with `ties`, values from small sets so that many biased scores tie
// exactly (and the others differ by at least 0.018).
void router_inputs(std::mt19937_64& rng, int64_t rows, int64_t E, bool ties,
                   std::vector<float>& logits, std::vector<float>& bias) {
  if (ties) {
    const float lv[3] = {-1.0f, 0.0f, 1.0f}, bv[3] = {0.0f, 0.1f, 0.25f};
    std::uniform_int_distribution<int> pick(0, 2);
    bias.resize(static_cast<size_t>(E));
    for (float& b : bias) b = bv[pick(rng)];
    logits.resize(static_cast<size_t>(rows * E));
    for (float& l : logits) l = lv[pick(rng)];
  } else {
    bias = random_vec(rng, E, -0.3f, 0.3f);
    logits.clear();
    for (int64_t t = 0; t < rows; ++t) {
      std::vector<float> row;
      do row = random_vec(rng, E, -3.0f, 3.0f);
      while (!well_separated(row.data(), bias));
      logits.insert(logits.end(), row.begin(), row.end());
    }
  }
  for (int64_t t = 0; t < rows; ++t) ASSERT_TRUE(well_separated(logits.data() + t * E, bias));
}

void check_router(RouterParams p, bool ties, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "E " << p.n_expert << " k " << p.top_k << " renorm "
                                    << p.renormalize << " scale " << p.scale << " ties " << ties);
  std::mt19937_64 rng(seed);
  const int64_t rows = 64, E = p.n_expert, k = p.top_k;
  std::vector<float> logits, bias;
  router_inputs(rng, rows, E, ties, logits, bias);
  const std::vector<float> dweight = random_vec(rng, rows * k),
                           dlogits0 = random_vec(rng, rows * E);

  std::vector<int32_t> sel_ref(static_cast<size_t>(rows * k));
  std::vector<float> w_ref(static_cast<size_t>(rows * k)), dl_ref = dlogits0;
  route_tokens(logits.data(), bias.data(), p, rows, sel_ref.data(), w_ref.data());
  route_tokens_bwd(logits.data(), sel_ref.data(), p, rows, dweight.data(), dl_ref.data());

  const DevBuf ld = upload(logits), bd = upload(bias), dwd = upload(dweight);
  DevArray<int32_t> sel(rows * k);
  DevBuf w(rows * k), dl = upload(dlogits0);
  router_fwd(ld.data(), bd.data(), p, rows, sel.data(), w.data());
  EXPECT_EQ(download(sel), sel_ref);
  EXPECT_LE(rel_err(download(w), w_ref), kTol);
  router_bwd(ld.data(), sel.data(), p, rows, dwd.data(), dl.data());
  EXPECT_LE(rel_err(download(dl), dl_ref), kTol);
}

TEST(TrainCudaAttn, RouterMatchesCpu) {
  K3_SKIP_WITHOUT_GPU();
  uint64_t seed = 400;
  for (bool ties : {false, true}) {
    for (bool renorm : {true, false}) {
      check_router({16, 4, renorm, 2.5f}, ties, seed++);
      check_router({16, 4, renorm, 1.0f}, ties, seed++);
      check_router({8, 1, renorm, 2.5f}, ties, seed++);
    }
  }
  check_router({100, 8, true, 1.5f}, false, seed++);  // more experts than a warp has lanes
}

TEST(TrainCudaAttn, RouterTiesGoToTheLowerExpert) {
  K3_SKIP_WITHOUT_GPU();
  // Every biased score equal: the k lowest ids win.
  const RouterParams p{16, 4, true, 1.0f};
  const std::vector<float> logits(2 * 16, 0.5f), bias(16, 0.125f);
  const DevBuf ld = upload(logits), bd = upload(bias);
  DevArray<int32_t> sel(2 * 4);
  DevBuf w(2 * 4);
  router_fwd(ld.data(), bd.data(), p, 2, sel.data(), w.data());
  EXPECT_EQ(download(sel), (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3}));
}

// ---- gathers and the routed experts' combine ---------------------------------------------

// Random choices (k distinct experts per token, ascending) grouped by expert as the model
// does: order lists the flat choices t·k + j expert by expert, inv[order[i]] = i.
void random_routing(std::mt19937_64& rng, int64_t rows, int64_t E, int64_t k,
                    std::vector<int64_t>& order, std::vector<int64_t>& inv) {
  std::vector<int32_t> sel(static_cast<size_t>(rows * k)), ids(static_cast<size_t>(E));
  for (int64_t t = 0; t < rows; ++t) {
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::sort(ids.begin(), ids.begin() + k);
    std::copy_n(ids.begin(), k, sel.begin() + t * k);
  }
  order.clear();
  for (int64_t e = 0; e < E; ++e)
    for (int64_t ch = 0; ch < rows * k; ++ch)
      if (sel[ch] == e) order.push_back(ch);
  inv.assign(order.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) inv[order[i]] = static_cast<int64_t>(i);
}

void check_combine(int64_t rows, int64_t E, int64_t k, int64_t width, uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "rows " << rows << " E " << E << " k " << k << " width " << width);
  std::mt19937_64 rng(seed);
  std::vector<int64_t> order, inv;
  random_routing(rng, rows, E, k, order, inv);
  const int64_t n = rows * k;
  const std::vector<float> y = random_vec(rng, n * width), weight = random_vec(rng, n, 0.0f, 2.0f),
                           c0 = random_vec(rng, rows * width), dc = random_vec(rng, rows * width),
                           dy0 = random_vec(rng, n * width), dw0 = random_vec(rng, n),
                           ddst = random_vec(rng, n * width), dsrc0 = random_vec(rng, rows * width);

  std::vector<float> c_ref = c0, dy_ref = dy0, dw_ref = dw0, dsrc_ref = dsrc0;
  moe_scatter_add(y.data(), order.data(), weight.data(), n, k, width, c_ref.data());
  moe_scatter_add_bwd(y.data(), order.data(), weight.data(), n, k, width, dc.data(), dy_ref.data(),
                      dw_ref.data());
  gather_choice_rows_bwd(ddst.data(), order.data(), n, k, width, dsrc_ref.data());

  const DevBuf yd = upload(y), wd = upload(weight), dcd = upload(dc), ddstd = upload(ddst);
  const DevArray<int64_t> invd = upload(inv);
  DevBuf c = upload(c0), dy = upload(dy0), dw = upload(dw0), dsrc = upload(dsrc0);
  moe_combine_fwd(yd.data(), invd.data(), wd.data(), rows, k, width, c.data());
  EXPECT_LE(rel_err(download(c), c_ref), kTol);
  moe_combine_bwd(yd.data(), invd.data(), wd.data(), rows, k, width, dcd.data(), dy.data(),
                  dw.data());
  EXPECT_LE(rel_err(download(dy), dy_ref), kTol);
  EXPECT_LE(rel_err(download(dw), dw_ref), kTol);
  gather_choices_bwd(ddstd.data(), invd.data(), rows, k, width, dsrc.data());
  EXPECT_LE(rel_err(download(dsrc), dsrc_ref), kTol);
}

TEST(TrainCudaAttn, MoeCombineMatchesCpu) {
  K3_SKIP_WITHOUT_GPU();
  uint64_t seed = 500;
  for (int64_t width : {1, 7, 64, 300}) {
    check_combine(1, 8, 1, width, seed++);
    check_combine(33, 8, 1, width, seed++);
    check_combine(1, 16, 4, width, seed++);
    check_combine(41, 16, 4, width, seed++);
  }
}

TEST(TrainCudaAttn, GatherRowsMatchesCpu) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(600);
  for (int64_t width : {1, 7, 300}) {
    const int64_t src_rows = 19, n = 50;
    const std::vector<float> src = random_vec(rng, src_rows * width);
    std::vector<int64_t> idx(static_cast<size_t>(n));
    std::uniform_int_distribution<int64_t> pick(0, src_rows - 1);
    for (int64_t& i : idx) i = pick(rng);  // repeats included
    std::vector<float> ref(static_cast<size_t>(n * width));
    gather_rows(src.data(), idx.data(), n, width, ref.data());
    const DevBuf sd = upload(src);
    const DevArray<int64_t> idxd = upload(idx);
    DevBuf dst(n * width);
    gather_rows_fwd(sd.data(), idxd.data(), n, width, dst.data());
    EXPECT_EQ(download(dst), ref) << "width " << width;
  }
}

}  // namespace
}  // namespace k3::train::gpu::test

#endif  // K3_HAVE_CUDA
