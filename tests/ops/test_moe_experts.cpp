// The routed experts as one op against the per-choice double reference: BF16, F32 and packed
// MXFP4 experts; one token, a few, several 8-token tiles per expert, every expert chosen
// (k = E), experts nobody chose, more than 128 tokens (the device's grouped GEMMs, and its
// per-expert path for BF16/F32); widths off the vector widths for BF16/F32.
#include <gtest/gtest.h>

#include "core/bf16.h"
#include "ops/harness.h"
#include "ops/moe/moe_experts.h"

namespace k3::test {
namespace {

// The storage behind E experts' matrices of one format.
struct Experts {
  std::vector<std::vector<uint8_t>> bytes;  // data, then scales, per matrix
  std::vector<ExpertMats> mats;
};

// MXFP4 scale codes: 120 + [0, 6) by default (2^-7 … 2^-2); wide cases draw from the whole
// finite range a checkpoint could hold (0 … 160: subnormal bf16 products, factors past 2^1).
struct ScaleRange {
  int lo = 120, span = 6;
};

Mat random_mat(int64_t rows, int64_t cols, MatFormat f, std::mt19937_64& rng,
               std::vector<std::vector<uint8_t>>& keep, ScaleRange sr = {}) {
  Mat m{rows, cols, f, nullptr, nullptr};
  const size_t n = static_cast<size_t>(rows * cols);
  if (f == MatFormat::mxfp4) {
    keep.emplace_back(n / 2);
    for (auto& b : keep.back()) b = static_cast<uint8_t>(rng());
    m.data = keep.back().data();
    keep.emplace_back(n / 32);
    for (auto& b : keep.back()) b = static_cast<uint8_t>(sr.lo + rng() % sr.span);
    m.scales = keep.back().data();
    return m;
  }
  const std::vector<float> v = randn(rng, n, 1.0 / std::sqrt(double(cols)));
  if (f == MatFormat::f32) {
    keep.emplace_back(n * 4);
    std::memcpy(keep.back().data(), v.data(), n * 4);
  } else {
    keep.emplace_back(n * 2);
    auto* p = reinterpret_cast<uint16_t*>(keep.back().data());
    for (size_t i = 0; i < n; ++i) p[i] = f32_to_bf16(v[i]);
  }
  m.data = keep.back().data();
  return m;
}

Experts random_experts(int64_t E, int64_t L, int64_t I, MatFormat f, std::mt19937_64& rng,
                       ScaleRange sr = {}) {
  Experts x;
  x.bytes.reserve(static_cast<size_t>(6 * E));  // pointers into it must stay put
  for (int64_t e = 0; e < E; ++e) {
    x.mats.push_back({random_mat(I, L, f, rng, x.bytes, sr), random_mat(I, L, f, rng, x.bytes, sr),
                      random_mat(L, I, f, rng, x.bytes, sr)});
  }
  return x;
}

const char* fmt_name(MatFormat f) {
  return f == MatFormat::mxfp4 ? "mxfp4" : f == MatFormat::bf16 ? "bf16" : "f32";
}

// hot: every token chooses expert 0 (one expert takes all rows, the rest share the others).
// bf16_act: the device may carry the expert inputs as bf16 (moe_experts.h), held to 1e-2, the
// GPU step's bound (rounding z and h once each gives about 2e-3 here); else 1e-5.
// Cases with scale codes over the whole range hold each output to its propagated error scale
// rather than max|want| (fp32-grade paths; see propagated_scales).
// rounded_ref: against the reference below instead, which rounds z and h to bf16 as the device
// does: with scale codes over the whole range, rounding z alone moves outputs by 20% of
// max|want| (gates near a cancellation flip), so only the rounded reference can bound them.
// same: every token picks experts 1 … k (so one expert holds all T rows when k = 1).
struct CaseOpts {
  bool hot = false, bf16_act = false, rounded_ref = false, same = false;
};
constexpr CaseOpts kSame{false, false, false, true};

float round_bf16(double v) { return bf16_to_f32(f32_to_bf16(static_cast<float>(v))); }

// moe_experts_ref with z and the SiTU-GLU output h rounded to bf16 (in double otherwise).
void moe_ref_rounded(const float* z, const int32_t* sel, const float* weight,
                     const ExpertMats* experts, MoeExpertsShape s, double* c) {
  const int64_t L = experts[0].gate.cols, I = experts[0].gate.rows;
  std::vector<float> wrow(static_cast<size_t>(std::max(L, I))), zb(static_cast<size_t>(L));
  std::vector<double> h(static_cast<size_t>(I));
  for (int64_t t = 0; t < s.T; ++t) {
    for (int64_t i = 0; i < L; ++i) zb[i] = round_bf16(z[t * L + i]);
    for (int64_t r = 0; r < L; ++r) c[t * L + r] = 0;
    for (int64_t j = 0; j < s.k; ++j) {
      const ExpertMats& w = experts[sel[t * s.k + j]];
      for (int64_t r = 0; r < I; ++r) {
        double ga = 0, up = 0;
        mat_row(w.gate, r, wrow.data());
        for (int64_t i = 0; i < L; ++i) ga += double(wrow[i]) * zb[i];
        mat_row(w.up, r, wrow.data());
        for (int64_t i = 0; i < L; ++i) up += double(wrow[i]) * zb[i];
        h[r] = round_bf16(situ_glu_ref(ga, up, s.situ));
      }
      for (int64_t r = 0; r < L; ++r) {
        mat_row(w.down, r, wrow.data());
        double d = 0;
        for (int64_t i = 0; i < I; ++i) d += double(wrow[i]) * h[i];
        c[t * L + r] += double(weight[t * s.k + j]) * d;
      }
    }
  }
}

// The fp32 error scale of each output [T, L], propagated through the expert: the gate and up
// dots carry their Σ|terms| (A, B), SiTU-GLU turns those into |∂h/∂a|·A + |∂h/∂b|·B on top of
// |h|, and the down projection and the routing weights sum them with |down| and w. With scale
// codes over the whole range a gate can cancel to near zero from terms of 2^30, where SiTU is
// steep: max|want| then says nothing of what fp32 can hold, this does, output by output.
std::vector<double> propagated_scales(const float* z, const int32_t* sel, const float* weight,
                                      const ExpertMats* experts, MoeExpertsShape s) {
  const int64_t L = experts[0].gate.cols, I = experts[0].gate.rows;
  std::vector<float> g(static_cast<size_t>(L)), u(static_cast<size_t>(L)),
      d(static_cast<size_t>(I));
  std::vector<double> err_h(static_cast<size_t>(I)), scales(static_cast<size_t>(s.T * L), 0.0);
  for (int64_t t = 0; t < s.T; ++t) {
    double* out = &scales[static_cast<size_t>(t * L)];
    for (int64_t j = 0; j < s.k; ++j) {
      const ExpertMats& w = experts[sel[t * s.k + j]];
      for (int64_t r = 0; r < I; ++r) {
        mat_row(w.gate, r, g.data());
        mat_row(w.up, r, u.data());
        double a = 0, b = 0, abs_a = 0, abs_b = 0;
        for (int64_t i = 0; i < L; ++i) {
          a += double(g[i]) * z[t * L + i];
          b += double(u[i]) * z[t * L + i];
          abs_a += std::fabs(double(g[i]) * z[t * L + i]);
          abs_b += std::fabs(double(u[i]) * z[t * L + i]);
        }
        const double ha = 1e-6 * std::max(1.0, std::fabs(a)),
                     hb = 1e-6 * std::max(1.0, std::fabs(b));
        const double da =
            (situ_glu_ref(a + ha, b, s.situ) - situ_glu_ref(a - ha, b, s.situ)) / (2 * ha);
        const double db =
            (situ_glu_ref(a, b + hb, s.situ) - situ_glu_ref(a, b - hb, s.situ)) / (2 * hb);
        err_h[r] =
            std::fabs(situ_glu_ref(a, b, s.situ)) + std::fabs(da) * abs_a + std::fabs(db) * abs_b;
      }
      for (int64_t r = 0; r < L; ++r) {
        mat_row(w.down, r, d.data());
        double e = 0;
        for (int64_t i = 0; i < I; ++i) e += std::fabs(double(d[i])) * err_h[i];
        out[r] += double(weight[t * s.k + j]) * e;
      }
    }
  }
  return scales;
}

OpCase moe_case(int64_t T, int64_t k, int64_t E, int64_t L, int64_t I, MatFormat f,
                ScaleRange sr = {}, CaseOpts o = {}) {
  const std::string shape =
      "T=" + std::to_string(T) + " k=" + std::to_string(k) + " E=" + std::to_string(E) +
      " L=" + std::to_string(L) + " I=" + std::to_string(I) + " " + fmt_name(f) +
      (sr.lo != 120 ? " scales " + std::to_string(sr.lo) + "+" + std::to_string(sr.span) : "") +
      (o.hot ? " hot" : "") + (o.bf16_act ? " bf16act" : "") +
      (o.rounded_ref ? " rounded-ref" : "") + (o.same ? " same experts" : "");
  return {
      "moe_experts", shape, o.bf16_act ? 1e-2 : 1e-5, [=](std::mt19937_64& rng, Impl impl) {
        const Experts ex = random_experts(E, L, I, f, rng, sr);
        const std::vector<float> z = randn(rng, T * L);
        std::vector<int32_t> sel(T * k);
        std::vector<int32_t> ids(E);
        for (int64_t t = 0; t < T; ++t) {  // k distinct experts, ascending (the router's)
          for (int64_t e = 0; e < E; ++e) ids[e] = static_cast<int32_t>(e);
          // Leave the last expert unchosen when k < E, so some experts get no rows.
          if (o.same) {
            std::rotate(ids.begin(), ids.begin() + 1, ids.end());  // 1 … k, expert 0 idle
          } else {
            std::shuffle(ids.begin() + (o.hot ? 1 : 0), ids.end() - (k < E ? 1 : 0), rng);
          }
          std::sort(ids.begin(), ids.begin() + k);
          std::copy_n(ids.begin(), k, sel.begin() + t * k);
        }
        const std::vector<float> weight = randu(rng, T * k, 0.05, 1.0);
        std::vector<float> got = randn(rng, T * L), want(T * L);  // c is overwritten
        const MoeExpertsShape s{T, k, E, {4.0f, 25.0f}, o.bf16_act};
        kMoeExpertsOp.ref(z.data(), sel.data(), weight.data(), ex.mats.data(), s, want.data());
        kMoeExpertsOp.get(impl)(z.data(), sel.data(), weight.data(), ex.mats.data(), s, got.data());
        if (o.rounded_ref && impl == Impl::cuda) {  // (the CPU ignores bf16_act)
          std::vector<double> rounded(T * L);
          moe_ref_rounded(z.data(), sel.data(), weight.data(), ex.mats.data(), s, rounded.data());
          return Outputs{got, rounded};
        }
        Outputs out{got, widen(want)};
        // Codes over the whole range: each output's error over its own propagated scale
        // (propagated_scales), the largest held to tol.
        if (sr.span > 100 && !o.bf16_act) {
          const std::vector<double> sc =
              propagated_scales(z.data(), sel.data(), weight.data(), ex.mats.data(), s);
          for (size_t i = 0; i < sc.size(); ++i) {
            out.got[i] = static_cast<float>(double(out.got[i]) / sc[i]);
            out.want[i] /= sc[i];
          }
          out.scale = 1.0;
        }
        return out;
      }};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  for (MatFormat f : {MatFormat::mxfp4, MatFormat::bf16, MatFormat::f32}) {
    const int64_t L = f == MatFormat::mxfp4 ? 64 : 40, I = f == MatFormat::mxfp4 ? 32 : 24;
    v.push_back(moe_case(1, 1, 1, L, I, f));
    v.push_back(moe_case(1, 2, 5, L, I, f));
    v.push_back(moe_case(5, 3, 6, L, I, f));
    v.push_back(moe_case(9, 4, 4, L, I, f));    // k = E: every expert has every token
    v.push_back(moe_case(40, 2, 7, L, I, f));   // several 8-token tiles per expert
    v.push_back(moe_case(130, 2, 3, L, I, f));  // beyond the grouped-GEMV step size
  }
  v.push_back(moe_case(3, 2, 4, 64, 64, MatFormat::bf16));                   // vectorised BF16 rows
  for (MatFormat f : {MatFormat::mxfp4, MatFormat::bf16, MatFormat::f32}) {  // the decode path
    const bool mx = f == MatFormat::mxfp4;  // MXFP4 rows hold whole 32-value groups
    v.push_back(moe_case(2, 2, 5, 64, mx ? 64 : 48, f));
    v.push_back(moe_case(2, 4, 4, 96, mx ? 32 : 40, f));  // both tokens on every expert
    v.push_back(moe_case(1, 4, 9, 128, 64, f));
  }
  // The device's tensor-core MXFP4 path (moe_mma.cu): widths past one 128-column chunk and
  // off it (160, 96: a partial chunk), rows past one 128-row block, 1 … 8·4 slot columns per
  // window (T·k/E slots an expert: 1, 4, 13, 48 with a second window), 128 tokens.
  v.push_back(moe_case(1, 4, 8, 256, 96, MatFormat::mxfp4));
  v.push_back(moe_case(1, 1, 3, 160, 160, MatFormat::mxfp4));
  v.push_back(moe_case(4, 4, 4, 160, 96, MatFormat::mxfp4));
  v.push_back(moe_case(16, 6, 7, 128, 288, MatFormat::mxfp4));
  v.push_back(moe_case(64, 6, 8, 96, 64, MatFormat::mxfp4));
  v.push_back(moe_case(128, 2, 5, 64, 32, MatFormat::mxfp4));
  v.push_back(moe_case(3, 2, 3, 64, 64, MatFormat::mxfp4, {0, 4}));     // subnormal bf16 weights
  v.push_back(moe_case(5, 2, 3, 96, 64, MatFormat::mxfp4, {0, 161}));   // codes 0 … 160
  v.push_back(moe_case(2, 2, 2, 64, 32, MatFormat::mxfp4, {125, 10}));  // 2^-2 … 2^7
  // The pipelined kernel and its window sizing (moe_mma.cu), at the decode batch sizes, with
  // many experts (about one slot an expert, most experts idle), a window of 8 or 16 slot
  // columns, experts past the window (looping over further windows), every token on one
  // expert, and rows of scales staged as bytes (33 groups), as words (8, 132 groups: past one
  // word a lane).
  v.push_back(moe_case(1, 16, 200, 128, 64, MatFormat::mxfp4));
  v.push_back(moe_case(2, 8, 64, 128, 96, MatFormat::mxfp4));
  v.push_back(moe_case(17, 4, 40, 64, 128, MatFormat::mxfp4));
  v.push_back(moe_case(64, 8, 300, 96, 64, MatFormat::mxfp4));
  v.push_back(moe_case(64, 8, 100, 64, 64, MatFormat::mxfp4));
  v.push_back(moe_case(128, 16, 200, 64, 32, MatFormat::mxfp4));
  v.push_back(moe_case(128, 1, 4, 64, 32, MatFormat::mxfp4, {}, kSame));  // one expert: 128 rows
  v.push_back(moe_case(33, 3, 5, 96, 64, MatFormat::mxfp4, {}, kSame));   // three experts
  v.push_back(moe_case(3, 2, 64, 64, 32, MatFormat::mxfp4, {}, kSame));   // 9 columns, 8 a window
  v.push_back(moe_case(8, 4, 16, 64, 32, MatFormat::mxfp4, {}, kSame));   // 24, 16 a window
  v.push_back(moe_case(2, 2, 3, 1056, 64, MatFormat::mxfp4));
  v.push_back(moe_case(1, 1, 2, 4224, 32, MatFormat::mxfp4));
  // The same kernels with one bf16 part a slot (bf16 precision), against the reference that
  // rounds z and h as the device does: a slot a window (batch 1), 8 and 16 slots a window, an
  // expert past its window, every token on one expert, wide scale codes.
  const CaseOpts one{false, true, true}, one_same{false, true, true, true};
  v.push_back(moe_case(1, 16, 200, 128, 64, MatFormat::mxfp4, {}, one));
  v.push_back(moe_case(1, 4, 8, 256, 96, MatFormat::mxfp4, {}, one));
  v.push_back(moe_case(4, 4, 4, 160, 96, MatFormat::mxfp4, {}, one));
  v.push_back(moe_case(16, 6, 7, 128, 288, MatFormat::mxfp4, {}, one));
  v.push_back(moe_case(64, 8, 100, 64, 64, MatFormat::mxfp4, {}, one));
  v.push_back(moe_case(128, 16, 200, 64, 32, MatFormat::mxfp4, {}, one));
  v.push_back(moe_case(33, 3, 5, 96, 64, MatFormat::mxfp4, {}, one_same));
  v.push_back(moe_case(128, 1, 4, 64, 32, MatFormat::mxfp4, {}, one_same));
  v.push_back(moe_case(5, 2, 3, 96, 64, MatFormat::mxfp4, {0, 161}, one));
  // The device's grouped GEMMs (moe_gemm.cu, steps over 128 tokens): partial 128-slot tiles,
  // one expert with every row (E = 1, hot), column tails of a 64-column step (L = 96, 160),
  // partial weight-row tiles (I = 160, 192), several row and column tiles, wide scales; each
  // fp32-grade (three parts) and with bf16 activations.
  for (const bool b : {false, true}) {
    const CaseOpts o{false, b}, hot{true, b};
    v.push_back(moe_case(129, 2, 3, 64, 32, MatFormat::mxfp4, {}, o));
    v.push_back(moe_case(300, 4, 8, 96, 160, MatFormat::mxfp4, {}, o));
    v.push_back(moe_case(300, 1, 1, 128, 64, MatFormat::mxfp4, {}, o));
    v.push_back(moe_case(257, 3, 5, 256, 192, MatFormat::mxfp4, {}, hot));
    v.push_back(moe_case(200, 2, 4, 160, 96, MatFormat::mxfp4, {0, 161}, {false, b, b}));
    v.push_back(moe_case(4096, 4, 16, 64, 64, MatFormat::mxfp4, {}, o));
  }
  // More choices x L than one wave of experts holds (moe_experts.cpp: 2^21 floats).
  v.push_back(moe_case(1100, 4, 9, 512, 8, MatFormat::f32));
  return v;
}

static Register reg(cases());

}  // namespace
}  // namespace k3::test
