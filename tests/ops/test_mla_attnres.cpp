// MLA absorbed and expanded forms against their double references (and the two references
// against each other); AttnRes mix vs its double reference and its closed forms.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cuda/cuda.h"
#include "core/bf16.h"
#include "core/precision.h"
#include "ops/attn_res/attn_res.h"
#include "ops/harness.h"
#include "ops/mla/mla.h"
#include "ops/norm/norm.h"

namespace k3::test {
namespace {

std::string mla_shape(MlaShape s, int64_t block) {
  return "T=" + std::to_string(s.T) + " past=" + std::to_string(s.n_past) +
         " H=" + std::to_string(s.H) + " Dn=" + std::to_string(s.Dn) +
         " Dr=" + std::to_string(s.Dr) + " Dv=" + std::to_string(s.Dv) +
         " Dc=" + std::to_string(s.Dc) + " block=" + std::to_string(block);
}

// A latent cache [S, Dc+Dr] stored in shuffled blocks of `block` rows (0: contiguous).
struct PagedCache {
  std::vector<float> storage;
  std::vector<int32_t> table;
  PagedRows view;
  PagedCache(const std::vector<float>& rows, int64_t S, int64_t width, int64_t block,
             std::mt19937_64& rng) {
    if (block == 0) {
      storage = rows;
      view = contiguous_rows(storage.data(), width);
      return;
    }
    const int64_t nb = (S + block - 1) / block;
    for (int64_t i = 0; i < nb; ++i) table.push_back(static_cast<int32_t>(i));
    std::shuffle(table.begin(), table.end(), rng);
    storage = randn(rng, (nb + 1) * block * width);  // junk outside the rows
    for (int64_t t = 0; t < S; ++t)
      std::copy_n(&rows[t * width], width,
                  &storage[(table[t / block] * block + t % block) * width]);
    view = {storage.data(), table.data(), block, block * width, width};
  }
};

// W_UK transposed per head: [H*Dc, Dn] from kv_b [H*(Dn+Dv), Dc] (the load-time transform).
std::vector<float> uk_transposed(const std::vector<float>& wkv, MlaShape s) {
  std::vector<float> t(s.H * s.Dc * s.Dn);
  for (int64_t h = 0; h < s.H; ++h)
    for (int64_t j = 0; j < s.Dn; ++j)
      for (int64_t c = 0; c < s.Dc; ++c)
        t[(h * s.Dc + c) * s.Dn + j] = wkv[(h * (s.Dn + s.Dv) + j) * s.Dc + c];
  return t;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
  return b;
}

// Random MLA weights: kv_b [H*(Dn+Dv), Dc] and its load-time W_UKᵀ split; stored as BF16 (as
// checkpoints hold them) when bf16, else F32.
struct MlaWeights {
  std::vector<float> wkv, ukt;
  std::vector<uint16_t> wkv16, ukt16;
  MlaAbsorbedWeights w;
  MlaWeights(std::mt19937_64& rng, MlaShape s, bool bf16 = false)
      : wkv(randn(rng, s.H * (s.Dn + s.Dv) * s.Dc, 1.0 / std::sqrt(s.Dc))),
        ukt(uk_transposed(wkv, s)),
        wkv16(bf16 ? to_bf16(wkv) : std::vector<uint16_t>{}),
        ukt16(bf16 ? to_bf16(ukt) : std::vector<uint16_t>{}) {
    const MatFormat f = bf16 ? MatFormat::bf16 : MatFormat::f32;
    const void* uk = bf16 ? static_cast<const void*>(ukt16.data()) : ukt.data();
    const void* kv = bf16 ? static_cast<const void*>(wkv16.data()) : wkv.data();
    w = {{s.H * s.Dc, s.Dn, f, uk, nullptr}, {s.H * (s.Dn + s.Dv), s.Dc, f, kv, nullptr}};
  }
};

// The absorbed attention over a (paged) latent cache against the double reference that
// expands every latent through kv_b.
OpCase mla_absorbed_case(MlaShape s, int64_t block) {
  return {"mla_absorbed", mla_shape(s, block), 2e-5, [=](std::mt19937_64& rng, Impl impl) {
            const int64_t S = s.n_past + s.T, Dq = s.Dn + s.Dr, Dcr = s.Dc + s.Dr;
            std::vector<float> q = randn(rng, s.T * s.H * Dq, 0.5);
            PagedCache cache(randn(rng, S * Dcr), S, Dcr, block, rng);
            const MlaWeights mw(rng, s);
            std::vector<float> o(s.T * s.H * s.Dv), o_ref(o.size());
            kMlaAbsorbedOp.get(impl)(q.data(), cache.view, mw.w, s, o.data());
            kMlaAbsorbedOp.ref(q.data(), cache.view, mw.w, s, o_ref.data());
            return Outputs{o, widen(o_ref)};
          }};
}

// A step's varlen batch: sequences of different lengths (queries n_i, past p_i), each over its
// own paged cache, at shuffled rows of one q/o (rows of no sequence are kept).
// bf16: the weights stored as BF16 (the device's per-head GEMVs then read them 16 bytes at a
// time where the widths allow).
OpCase mla_batch_case(std::vector<std::pair<int64_t, int64_t>> n_past, MlaShape d, int64_t block,
                      bool bf16 = false) {
  std::string shape = "H=" + std::to_string(d.H) + " Dn=" + std::to_string(d.Dn) +
                      " Dr=" + std::to_string(d.Dr) + " Dv=" + std::to_string(d.Dv) +
                      " Dc=" + std::to_string(d.Dc) + " block=" + std::to_string(block) +
                      (bf16 ? " bf16" : "") + " seqs";
  for (auto [n, p] : n_past) shape += " " + std::to_string(n) + "/" + std::to_string(p);
  return {"mla_absorbed_batch", shape, 2e-5, [=](std::mt19937_64& rng, Impl impl) {
            const int64_t Dq = d.Dn + d.Dr, Dcr = d.Dc + d.Dr, ns = n_past.size();
            int64_t T = 1;  // one spare row that no sequence owns
            for (auto [n, p] : n_past) T += n;
            std::vector<int64_t> order(ns);
            for (int64_t i = 0; i < ns; ++i) order[i] = i;
            std::shuffle(order.begin(), order.end(), rng);
            std::vector<PagedCache> caches;
            caches.reserve(ns);
            std::vector<MlaBatchSeq> seqs(ns);
            int64_t t0 = 1;
            for (int64_t i : order) {
              const auto [n, p] = n_past[i];
              caches.emplace_back(randn(rng, (n + p) * Dcr), n + p, Dcr, block, rng);
              seqs[i] = {t0, n, p, caches.back().view};
              t0 += n;
            }
            std::vector<float> q = randn(rng, T * d.H * Dq, 0.5);
            const MlaWeights mw(rng, d, bf16);
            std::vector<float> o = randn(rng, T * d.H * d.Dv), o_ref = o;
            kMlaAbsorbedBatchOp.get(impl)(q.data(), seqs.data(), ns, mw.w, d, o.data());
            kMlaAbsorbedBatchOp.ref(q.data(), seqs.data(), ns, mw.w, d, o_ref.data());
            return Outputs{o, widen(o_ref)};
          }};
}

// Expanded keys [S, H, Dn+Dr] and values [S, H, Dv] from a latent cache [S, Dc+Dr], in
// double (rounded once to fp32): what the layer's kv_b projection produces.
void expand_latents(const std::vector<float>& cache, const std::vector<float>& wkv, MlaShape s,
                    std::vector<float>& k, std::vector<float>& v) {
  const int64_t S = s.n_past + s.T, Dq = s.Dn + s.Dr, Dcr = s.Dc + s.Dr;
  k.assign(S * s.H * Dq, 0.0f);
  v.assign(S * s.H * s.Dv, 0.0f);
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
}

// The expanded attention on random keys and values against its double reference.
OpCase mla_expanded_case(MlaShape s) {
  return {"mla_expanded", mla_shape(s, 0), 2e-5, [=](std::mt19937_64& rng, Impl impl) {
            const int64_t S = s.n_past + s.T, Dq = s.Dn + s.Dr;
            std::vector<float> q = randn(rng, s.T * s.H * Dq, 0.5);
            std::vector<float> k = randn(rng, S * s.H * Dq), v = randn(rng, S * s.H * s.Dv);
            std::vector<float> o(s.T * s.H * s.Dv), o_ref(o.size());
            kMlaExpandedOp.get(impl)(q.data(), k.data(), v.data(), s, o.data());
            kMlaExpandedOp.ref(q.data(), k.data(), v.data(), s, o_ref.data());
            return Outputs{o, widen(o_ref)};
          }};
}

// The matrix form (the registered cpu one) against the loop it replaced, both fp32.
OpCase mla_expanded_vs_loop_case(MlaShape s) {
  return {"mla_expanded", mla_shape(s, 0) + " vs loop", 2e-5, [=](std::mt19937_64& rng, Impl impl) {
            const int64_t S = s.n_past + s.T, Dq = s.Dn + s.Dr;
            std::vector<float> q = randn(rng, s.T * s.H * Dq, 0.5);
            std::vector<float> k = randn(rng, S * s.H * Dq), v = randn(rng, S * s.H * s.Dv);
            std::vector<float> o(s.T * s.H * s.Dv), o_loop(o.size());
            kMlaExpandedOp.get(impl)(q.data(), k.data(), v.data(), s, o.data());
            mla_attention_expanded_loop(q.data(), k.data(), v.data(), s, o_loop.data());
            return Outputs{o, widen(o_loop)};
          }};
}

OpCase attn_res_case(int64_t n, int64_t T, int64_t d) {
  std::string shape =
      "n=" + std::to_string(n) + " T=" + std::to_string(T) + " d=" + std::to_string(d);
  return {"attn_res_mix", shape, 2e-6, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<std::vector<float>> c;
            std::vector<const float*> p;
            for (int64_t i = 0; i < n; ++i) c.push_back(randn(rng, T * d, 1.0 + i));
            for (auto& x : c) p.push_back(x.data());
            std::vector<float> w = randn(rng, d, 2.0 / std::sqrt(d)), o(T * d), o_ref(T * d);
            kAttnResMixOp.get(impl)(p.data(), {n, T, d}, w.data(), 1e-5f, o.data());
            kAttnResMixOp.ref(p.data(), {n, T, d}, w.data(), 1e-5f, o_ref.data());
            return Outputs{o, widen(o_ref)};
          }};
}

// The mix and the norm in one op: against the two references in turn (norm weights near 1,
// some negative).
OpCase attn_res_norm_case(int64_t n, int64_t T, int64_t d) {
  std::string shape =
      "n=" + std::to_string(n) + " T=" + std::to_string(T) + " d=" + std::to_string(d);
  return {"attn_res_norm", shape, 2e-6, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<std::vector<float>> c;
            std::vector<const float*> p;
            for (int64_t i = 0; i < n; ++i) c.push_back(randn(rng, T * d, 1.0 + i));
            for (auto& x : c) p.push_back(x.data());
            const std::vector<float> w = randn(rng, d, 2.0 / std::sqrt(d)), wn = randn(rng, d, 1.0);
            std::vector<float> o(T * d), a(T * d), o_ref(T * d);
            kAttnResNormOp.get(impl)(p.data(), {n, T, d}, w.data(), wn.data(), 1e-5f, o.data());
            kAttnResMixOp.ref(p.data(), {n, T, d}, w.data(), 1e-5f, a.data());
            kRmsNormOp.ref(a.data(), T, d, wn.data(), 1e-5f, o_ref.data());
            return Outputs{o, widen(o_ref)};
          }};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  // The expanded form's query tiles (32): tails, a past, odd widths, the K3-small head dims.
  for (MlaShape s : {MlaShape{33, 5, 3, 7, 3, 5, 8},
                     {65, 0, 2, 16, 8, 17, 8},
                     {96, 31, 1, 9, 0, 4, 8},
                     {130, 0, 2, 64, 32, 64, 256}}) {
    v.push_back(mla_expanded_case(s));
    v.push_back(mla_expanded_vs_loop_case(s));
  }
  for (MlaShape s : {MlaShape{1, 0, 1, 8, 4, 8, 16},
                     {1, 9, 3, 16, 8, 16, 24},
                     {7, 0, 2, 16, 8, 12, 32},
                     {5, 4, 4, 8, 0, 8, 16},
                     {3, 2, 2, 32, 16, 32, 48},
                     {4, 3, 1, 1, 1, 1, 1},            // every width one
                     {70, 0, 1, 8, 4, 8, 16},          // queries span two key tiles
                     {2, 150, 2, 8, 4, 8, 16},         // past spans several key tiles
                     {2, 150, 2, 16, 16, 16, 144}}) {  // the same on the AVX-512 kernels
    v.push_back(mla_expanded_case(s));
    for (int64_t block : {0, 1, 4, 16}) v.push_back(mla_absorbed_case(s, block));
  }
  // Batches: one and many sequences, decode and chunk rows, more than one row group (48 rows)
  // and key range, the model's widths (H=8 of 96), empty sequences.
  const MlaShape small{0, 0, 3, 16, 8, 12, 32}, wide{0, 0, 8, 128, 64, 128, 512};
  for (int64_t block : {0, 1, 16}) {
    v.push_back(mla_batch_case({{1, 0}}, small, block));
    v.push_back(mla_batch_case({{1, 5}, {2, 40}, {1, 0}, {0, 3}, {3, 100}}, small, block));
    v.push_back(mla_batch_case({{20, 3}, {1, 700}}, small, block));  // 60 rows: two groups
    v.push_back(mla_batch_case({{1, 1}, {1, 66}, {1, 0}}, {0, 0, 1, 1, 1, 1, 1}, block));
    v.push_back(mla_batch_case({{1, 9}, {2, 1}}, {0, 0, 2, 8, 0, 8, 16}, block));  // no rope part
  }
  v.push_back(mla_batch_case({{1, 37}, {7, 2}, {1, 130}}, wide, 16));
  v.push_back(mla_batch_case({{2, 300}}, wide, 0));
  for (auto [n, T, d] :
       {std::tuple{1, 1, 8}, {2, 3, 48}, {9, 5, 64}, {4, 1, 7168}, {3, 2, 1}, {5, 7, 17}}) {
    v.push_back(attn_res_case(n, T, d));
    v.push_back(attn_res_norm_case(n, T, d));
  }
  // BF16 weights: widths a multiple of 8 (16-byte weight rows: the device's row GEMVs), one
  // token and chunks of 8 tokens and past them, and widths off 8 (the tiled kernel).
  for (int64_t block : {0, 16}) {
    v.push_back(mla_batch_case({{1, 0}}, {0, 0, 3, 16, 8, 16, 32}, block, true));
    v.push_back(mla_batch_case({{1, 37}, {7, 2}, {1, 130}}, wide, block, true));
    v.push_back(mla_batch_case({{9, 5}, {12, 0}, {1, 3}}, {0, 0, 5, 24, 8, 40, 64}, block, true));
    v.push_back(mla_batch_case({{2, 7}, {1, 1}}, {0, 0, 2, 12, 4, 12, 20}, block, true));
  }
  v.push_back(attn_res_norm_case(13, 3, 7168));  // the model's width, many sealed blocks
  v.push_back(attn_res_norm_case(2, 64, 1030));  // a decode batch, d % 4 != 0
  return v;
}

static Register reg(cases());

// The absorbed decode in bf16 precision on the device: the split-KV kernel with bf16 scores and
// probabilities (hi parts only) against the double reference, with bf16 precision's own bound
// (1e-2 of max|want|; the fp32-grade kernel keeps the op's 2e-5 above). Shapes: the model's
// latent width (576-wide rows: the straight copy and conversion path) in contiguous and paged
// caches with partial key tiles, several sequences and row groups, and a narrow width (the
// general path). Skipped without a device.
TEST(MlaDecodeBf16, CudaMatchesReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Precision saved = active_precision();
  set_precision(Precision::bf16);
  cuda_set_host_staging(true);  // host pointers in and out, as the op harness does
  const MlaShape wide{0, 0, 8, 128, 64, 128, 512}, small{0, 0, 3, 16, 8, 12, 32};
  using Seqs = std::vector<std::pair<int64_t, int64_t>>;
  for (const auto& [seqs, d, block] : {std::tuple{Seqs{{1, 37}, {7, 2}, {1, 130}}, wide, 16},
                                       {Seqs{{2, 300}}, wide, 0},
                                       {Seqs{{1, 700}, {1, 33}, {1, 0}}, wide, 1},
                                       {Seqs{{7, 90}}, wide, 16},  // 56 rows: two row groups
                                       {Seqs{{20, 3}, {1, 700}}, small, 16}}) {
    const OpCase c = mla_batch_case(seqs, d, block, true);
    std::mt19937_64 rng(7 + block + seqs.size() * 131 + d.Dc);
    const Outputs out = c.run(rng, Impl::cuda);
    const double err = rel_max_error(out.got, out.want, out.scale);
    std::printf("mla decode bf16 [%s]: rel max error %.2e\n", c.shape.c_str(), err);
    EXPECT_LE(err, 1e-2) << c.shape;
  }
  cuda_set_host_staging(false);
  set_precision(saved);
}

// The two references agree: attending over expanded latents (rounded to fp32 once) equals
// attending over the latents through kv_b.
TEST(Mla, ExpandedAndAbsorbedReferencesAgree) {
  for (MlaShape s : {MlaShape{3, 0, 2, 16, 8, 12, 32}, {2, 20, 3, 8, 4, 8, 16}}) {
    std::mt19937_64 rng(0x31a + s.n_past);
    const int64_t S = s.n_past + s.T, Dq = s.Dn + s.Dr, Dcr = s.Dc + s.Dr;
    std::vector<float> q = randn(rng, s.T * s.H * Dq, 0.5), cache = randn(rng, S * Dcr), k, v;
    const MlaWeights mw(rng, s);
    expand_latents(cache, mw.wkv, s, k, v);
    std::vector<float> o(s.T * s.H * s.Dv), o_abs(o.size());
    mla_attention_expanded_ref(q.data(), k.data(), v.data(), s, o.data());
    mla_attention_ref(q.data(), contiguous_rows(cache.data(), Dcr), mw.w, s, o_abs.data());
    EXPECT_LE(rel_max_error(o, widen(o_abs)), 1e-6) << mla_shape(s, 0);
  }
}

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
