// Whole-model golden tests: the engine against float64 references from two independent
// implementations (tests/reference/k3_ref.py for tests/data/models/*, and another team's for
// tests/data/public_golden/*). Required: relative L2 error of every position's logits
// <= 5e-5 and identical argmax, for prefill and for token-by-token decode; decode equals
// prefill; prefill of a prefix followed by decode equals one full pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/cpu_isa.h"
#include "core/precision.h"
#include "k3/k3.h"
#include "k3/npy.h"
#include "model/golden_cases.h"
#include "model/near_ties.h"
#include "ops/linear/linear.h"

namespace k3 {
namespace {
namespace fs = std::filesystem;

constexpr double kTol = 5e-5;

std::vector<std::string> case_dirs() { return test::golden_case_dirs(); }

std::vector<int64_t> read_ids(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f).get<std::vector<int64_t>>();
}

struct Compare {
  double max_rel = 0;  // the worst position's
  int64_t worst = -1, argmax_mismatch = 0;
};

int64_t argmax(const float* x, int64_t n) { return std::max_element(x, x + n) - x; }

// Per-position relative L2 of got vs want ([T, V] each) and argmax agreement.
Compare compare(const std::vector<float>& got, const std::vector<float>& want, int64_t V) {
  Compare c;
  for (int64_t t = 0; t * V < static_cast<int64_t>(want.size()); ++t) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < V; ++i) {
      const double d = double(got[t * V + i]) - want[t * V + i];
      num += d * d;
      den += double(want[t * V + i]) * want[t * V + i];
    }
    const double rel = std::sqrt(num / den);
    if (!(rel <= c.max_rel)) {
      c.max_rel = rel;
      c.worst = t;
    }
    c.argmax_mismatch += argmax(&got[t * V], V) != argmax(&want[t * V], V);
  }
  return c;
}

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = Model::load(GetParam());
    ids_ = read_ids(GetParam() + "/tokens.json");
    V_ = model_->vocab_size();
  }
  std::vector<float> reference(const char* name) {
    NpyArray a = npy_read_f32(GetParam() + "/" + name);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{static_cast<int64_t>(ids_.size()), V_}));
    return a.data;
  }
  std::vector<float> decode_all(Sequence& seq, size_t from) {
    std::vector<float> out;
    for (size_t t = from; t < ids_.size(); ++t) {
      std::vector<float> row = seq.decode(ids_[t]);
      out.insert(out.end(), row.begin(), row.end());
    }
    return out;
  }
  void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what, double tol = kTol) {
    ASSERT_EQ(got.size(), want.size()) << what;
    Compare c = compare(got, want, V_);
    std::printf("    %-34s max rel L2 %.3e (position %lld), argmax mismatches %lld\n", what.c_str(),
                c.max_rel, (long long)c.worst, (long long)c.argmax_mismatch);
    EXPECT_LE(c.max_rel, tol) << what << ": worst position " << c.worst;
    EXPECT_EQ(c.argmax_mismatch, 0) << what;
  }

  std::unique_ptr<Model> model_;
  std::vector<int64_t> ids_;
  int64_t V_ = 0;
};

TEST_P(Golden, PrefillMatchesReference) {
  Sequence seq(*model_);
  expect_close(seq.prefill(ids_), reference("logits_prefill.npy"), "prefill vs reference");
}

TEST_P(Golden, DecodeMatchesReference) {
  Sequence seq(*model_);
  expect_close(decode_all(seq, 0), reference("logits_decode.npy"), "decode vs reference");
}

TEST_P(Golden, DecodeEqualsPrefill) {
  Sequence a(*model_), b(*model_);
  expect_close(decode_all(b, 0), a.prefill(ids_), "decode vs engine prefill");
}

TEST_P(Golden, PrefixPrefillThenDecodeEqualsOnePass) {
  const size_t half = ids_.size() / 2;
  if (half == 0) GTEST_SKIP() << "one-token prompt";
  Sequence seq(*model_);
  std::vector<float> got = seq.prefill({ids_.begin(), ids_.begin() + half});
  std::vector<float> rest = decode_all(seq, half);
  got.insert(got.end(), rest.begin(), rest.end());
  expect_close(got, reference("logits_prefill.npy"), "prefix prefill + decode vs reference");
}

TEST_P(Golden, PrefillInPiecesEqualsOnePass) {
  if (ids_.size() < 3) GTEST_SKIP() << "too short to split";
  // Uneven pieces so chunk boundaries and the MLA cache offset both move.
  const size_t a = ids_.size() / 3, b = ids_.size() - ids_.size() / 4;
  Sequence seq(*model_);
  std::vector<float> got;
  for (auto [lo, hi] : {std::pair{size_t{0}, a}, {a, b}, {b, ids_.size()}}) {
    std::vector<float> part = seq.prefill({ids_.begin() + lo, ids_.begin() + hi});
    got.insert(got.end(), part.begin(), part.end());
  }
  expect_close(got, reference("logits_prefill.npy"), "prefill in 3 pieces vs reference");
}

TEST_P(Golden, GreedyContinuationMatches) {
  const std::string path = GetParam() + "/greedy.json";
  if (!fs::exists(path)) GTEST_SKIP() << "no greedy.json";
  std::ifstream f(path);
  auto want = nlohmann::json::parse(f)["continuation"].get<std::vector<int64_t>>();
  Sequence seq(*model_);
  std::vector<float> logits = seq.prefill(ids_);
  int64_t next = argmax(&logits[(ids_.size() - 1) * V_], V_);
  std::vector<int64_t> got;
  for (size_t i = 0; i < want.size(); ++i) {
    got.push_back(next);
    std::vector<float> row = seq.decode(next);
    next = argmax(row.data(), V_);
  }
  EXPECT_EQ(got, want);
}

std::string name_of(const ::testing::TestParamInfo<std::string>& info) {
  return fs::path(info.param).filename().string();
}

INSTANTIATE_TEST_SUITE_P(Cases, Golden, ::testing::ValuesIn(case_dirs()), name_of);

// The low-precision modes (bf16, q8) on the trained default model (models/default) against
// float64 references (tests/reference/k3_ref.py, data in tests/data/trained_default, written by
// tests/reference/make_trained_default.py with each shipped model), under the near-tie rules of
// near_ties.h.
// bf16 precision (core/precision.h; docs/CPU.md): activations rounded to bf16 before every
// BF16 / MXFP4 matmul but the router. Checked on every path (each CPU path, and vdpbf16ps and its
// fallback where the CPU has AVX512_BF16), prefill and token-by-token decode; the fp32 path is
// held to kTol on the same data. The error is the mode's (activations rounded to bf16), not a
// kernel's (that is held tightly below, against a reference that rounds as the mode does).
// Measured on the model shipped fourth on 2026-12-07 (72 experts top-6): 1.7e-3 to 3.4e-3
// (scalar, avx2) off the 8 router near-ties, 1.03e-1 at the three prefill swaps; on the second
// (48 experts): 3.5e-3 to 4.3e-3 (no tie swapped); on earlier models 4.0e-3 to 2.17e-2.
constexpr double kBf16Tol = 2.5e-2;

class TrainedDefault : public Golden {
 protected:
  void SetUp() override {  // the model is models/default, the data tests/data/trained_default
    model_ = Model::load(GetParam());
    ids_ = read_ids(kData + "tokens.json");
    V_ = model_->vocab_size();
    ties_ = test::NearTies::load(kData + "ties.json");
    ASSERT_EQ(ties_.router_margin.size(), ids_.size());
    ASSERT_EQ(ties_.logit_margin.size(), ids_.size());
  }
  void TearDown() override {
    set_bf16_dot_allowed(true);
    set_isa(saved_isa_);
    set_precision(Precision::fp32);
  }
  // fn(path name) on every bf16 path: each CPU path, with vdpbf16ps and with its fallback
  // where the CPU has AVX512_BF16.
  template <typename F>
  void for_each_bf16_path(F&& fn) {
    set_precision(Precision::bf16);
    for (Isa isa : supported_isas()) {
      set_isa(isa);
      for (bool native : {false, true}) {
        if (native && !bf16_dot_available()) continue;
        set_bf16_dot_allowed(native);
        fn(std::string(isa_name(isa)) + (native ? "+vdpbf16ps" : "+fallback"));
      }
    }
  }
  std::vector<float> reference(const char* name) {
    NpyArray a = npy_read_f32(kData + name);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{static_cast<int64_t>(ids_.size()), V_}));
    return a.data;
  }
  void expect_close_mode(const std::vector<float>& got, const std::vector<float>& want,
                         const std::string& what, double tol) {
    ASSERT_EQ(got.size(), want.size()) << what;
    ties_.expect_close(got.data(), want.data(), V_, what, tol);
  }
  const std::string kData = K3_SOURCE_DIR "/tests/data/trained_default/";
  Isa saved_isa_ = active_isa();
  test::NearTies ties_;
};

TEST_P(TrainedDefault, Fp32MatchesReference) {
  Sequence a(*model_), b(*model_);
  expect_close(a.prefill(ids_), reference("logits_prefill.npy"), "fp32 prefill vs reference");
  expect_close(decode_all(b, 0), reference("logits_decode.npy"), "fp32 decode vs reference");
}

TEST_P(TrainedDefault, Bf16MatchesReferenceOnEveryPath) {
  for_each_bf16_path([&](const std::string& path) {
    Sequence a(*model_), b(*model_);
    expect_close_mode(a.prefill(ids_), reference("logits_prefill.npy"), "bf16 prefill " + path,
                      kBf16Tol);
    expect_close_mode(decode_all(b, 0), reference("logits_decode.npy"), "bf16 decode " + path,
                      kBf16Tol);
  });
}

// The kernels of the bf16 mode held tightly: the same runs against a float64 reference that
// rounds as the mode does (tests/reference/k3_ref.py --round-bf16: every BF16/MXFP4 matmul's
// input rounded to bf16, the router's not; logits_*_bf16.npy). A first position goes through
// every kind of matmul the mode rounds (the KDA and MLA projections, MLA's latent-to-value
// product, the experts, the LM head) and there only the engine's fp32 arithmetic is left, if
// no rounded input lies within a few fp32 ulps of a bf16 rounding midpoint: fp32 against float64
// moves values by a few ulps, and an input that rounds the other way moves the logits by ~1e-3
// (on the model shipped 2026-12-07, 12 of 40 random one-token prompts did, on inputs 0 to 5 ulps
// from a midpoint; the other 28 matched to 4.9e-8 to 6.3e-8 on the scalar and avx2 paths). So
// the tight bound applies to one-token prompts whose inputs all lie >= 12 ulps from a midpoint
// and that the reference's fp32 emulation rounds alike too (an input that cancels carries an
// fp32 error of many of its own ulps: on the model shipped second on 2026-12-07 the AVX2 path
// rounded one such input of a 12-ulp-clear prompt the other way, 2.3e-3; the emulation had
// rounded 14 of that prompt's inputs the other way). ties.json's first_ids are those prompts,
// chosen by the reference, run by prefill and by decode. Later positions of
// the 32-token text are held to the mode's bound: the recurrent state and the cache carry each
// rounding flip on.
constexpr double kBf16FirstTol = 1e-5;

TEST_P(TrainedDefault, Bf16MatchesRoundingReferenceOnEveryPath) {
  ASSERT_FALSE(ties_.first_ids.empty());
  const int64_t n_first = static_cast<int64_t>(ties_.first_ids.size());
  const NpyArray first_prefill = npy_read_f32(kData + "logits_first_prefill_bf16.npy");
  const NpyArray first_decode = npy_read_f32(kData + "logits_first_decode_bf16.npy");
  for (const NpyArray* a : {&first_prefill, &first_decode})
    ASSERT_EQ(a->shape, (std::vector<int64_t>{n_first, V_}));
  const std::vector<float> want_prefill = reference("logits_prefill_bf16.npy");
  const std::vector<float> want_decode = reference("logits_decode_bf16.npy");
  for_each_bf16_path([&](const std::string& path) {
    double worst_first = 0;
    for (int64_t i = 0; i < n_first; ++i) {
      Sequence a(*model_), b(*model_);
      for (const auto& [got, want] : {std::pair{a.prefill({ties_.first_ids[i]}), &first_prefill},
                                      std::pair{b.decode(ties_.first_ids[i]), &first_decode}}) {
        const std::vector<float> row(want->data.begin() + i * V_,
                                     want->data.begin() + (i + 1) * V_);
        worst_first = std::max(worst_first, compare(got, row, V_).max_rel);
      }
    }
    std::printf("    bf16 %-20s vs rounding ref: %zu one-token prompts, worst %.3e\n", path.c_str(),
                ties_.first_ids.size(), worst_first);
    EXPECT_LE(worst_first, kBf16FirstTol) << path;
    Sequence a(*model_), b(*model_);
    expect_close_mode(a.prefill(ids_), want_prefill, "bf16 prefill " + path + " vs rounding",
                      kBf16Tol);
    expect_close_mode(decode_all(b, 0), want_decode, "bf16 decode " + path + " vs rounding",
                      kBf16Tol);
  });
}

// q8 precision (core/precision.h; docs/CPU.md): bf16 for the BF16 matmuls, and int8
// activations (blocks of 32, one fp32 scale each) for the MXFP4 ones (the routed experts of
// models/default). Its own stated tolerance on the trained model against the same float64
// reference, on every path (scalar, AVX2, AVX-512 VNNI: bit-identical to each other for the
// int8 matmuls), prefill and decode, with the near-tie rules above.
// Measured on the model shipped second on 2026-12-07 away from router near-ties: 7.9e-3 to
// 9.8e-3 (scalar, avx2), one or two ties swapped (position 25: 1.3e-1; position 26 after it
// 3.5e-2, its carry 3.6e-2); on earlier models, all positions, 4.6e-3 to 1.86e-2.
constexpr double kQ8Tol = 2.5e-2;

TEST_P(TrainedDefault, Q8MatchesReferenceOnEveryPath) {
  set_precision(Precision::q8);
  for (Isa isa : supported_isas()) {
    set_isa(isa);
    const std::string path = std::string(isa_name(isa)) + "+" + q8_kernel_name();
    Sequence a(*model_), b(*model_);
    expect_close_mode(a.prefill(ids_), reference("logits_prefill.npy"), "q8 prefill " + path,
                      kQ8Tol);
    expect_close_mode(decode_all(b, 0), reference("logits_decode.npy"), "q8 decode " + path,
                      kQ8Tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Model, TrainedDefault,
                         ::testing::Values(std::string(K3_SOURCE_DIR "/models/default")), name_of);

}  // namespace
}  // namespace k3
