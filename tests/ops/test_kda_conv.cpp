// KDA: the chunked and recurrent forms against the double recurrence (T = 1, T not a multiple
// of the chunk, several chunks, a non-zero initial state); the short conv against its
// reference, also when the sequence is fed in pieces; the decay gate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "core/fp_env.h"
#include "core/precision.h"
#include "ops/conv1d/conv1d.h"
#include "ops/harness.h"
#include "ops/kda/kda.h"
#include "ops/kda/kda_gate.h"
#include "ops/norm/norm.h"

namespace k3::test {
namespace {

struct KdaData {
  std::vector<float> q, k, v, g, beta, S0;
  KdaInputs in() const { return {q.data(), k.data(), v.data(), g.data(), beta.data()}; }
};

// How a case's gates and initial state are drawn.
enum class Gates { mild, strong };  // strong: g down to −40, decays underflow within a chunk
struct KdaVariant {
  Gates gates = Gates::mild;
  bool initial_state = true;  // false: the sequence starts from S = 0
  bool flushed = false;       // the op under test runs with subnormals flushed, as the engine does
};

std::string variant_name(KdaVariant var) {
  return std::string(var.gates == Gates::strong ? " strong" : "") +
         (var.initial_state ? "" : " S0=0") + (var.flushed ? " flushed" : "");
}

// Runs fn, with subnormals flushed (core/fp_env.h) when `flushed`.
template <typename Fn>
auto maybe_flushed(bool flushed, Fn&& fn) {
  if (!flushed) return fn();
  const FlushSubnormals flush;
  return fn();
}

// Inputs as the layer produces them: L2-normalised q (scaled) and k, g ∈ (−5, 0), β ∈ (0, 1).
KdaData kda_data(std::mt19937_64& rng, KdaShape s, KdaVariant var = {}) {
  KdaData d;
  d.q = randn(rng, s.T * s.H * s.K);
  d.k = randn(rng, s.T * s.H * s.K);
  l2_norm(d.q.data(), s.T * s.H, s.K, 1e-6f);
  l2_norm(d.k.data(), s.T * s.H, s.K, 1e-6f);
  for (float& x : d.q) x /= std::sqrt(static_cast<float>(s.K));
  d.v = randn(rng, s.T * s.H * s.V);
  if (var.gates == Gates::mild) {
    d.g = randu(rng, s.T * s.H * s.K, -5.0, -1e-3);
    // Mostly mild decays, as trained models have; some channels near the lower bound.
    for (float& x : d.g) x = x < -4.0f ? x : x * 0.05f;
  } else {
    // Past any gate bound: e^{Σg} underflows float within a few tokens on most channels, and a
    // sub-chunk's decay spread exceeds what the fp32 form factorises.
    d.g = randu(rng, s.T * s.H * s.K, -40.0, -1e-3);
  }
  d.beta = randu(rng, s.T * s.H, 0.05, 0.95);
  d.S0 = var.initial_state ? randn(rng, s.H * s.K * s.V, 0.3)
                           : std::vector<float>(static_cast<size_t>(s.H * s.K * s.V), 0.0f);
  return d;
}

std::string kda_shape(KdaShape s) {
  return "T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) + " K=" + std::to_string(s.K) +
         " V=" + std::to_string(s.V);
}

// Runs fn from d's initial state; returns the output and the final state, concatenated.
template <typename Fn>
std::vector<float> run_kda(Fn&& fn, const KdaData& d, KdaShape s) {
  std::vector<float> o(s.T * s.H * s.V), S = d.S0;
  fn(d.in(), s, S.data(), o.data());
  o.insert(o.end(), S.begin(), S.end());
  return o;
}

// `op` is only read when the case runs: cases are built during static initialisation, in no
// set order with the tables.
template <typename Table>
OpCase kda_case(const char* name, const Table& op, KdaShape s, KdaVariant var = {}) {
  return {name, kda_shape(s) + variant_name(var), 2e-5,
          [&op, s, var](std::mt19937_64& rng, Impl impl) {
            KdaData d = kda_data(rng, s, var);
            std::vector<float> got =
                maybe_flushed(var.flushed, [&] { return run_kda(op.get(impl), d, s); });
            return Outputs{std::move(got), widen(run_kda(op.ref, d, s))};
          }};
}

// The fp32 matrix form (kda_chunked, the registered cpu one) against the double chunk algebra
// it replaced (kda_chunked_f64), on the same chunk of 64; the harness runs it on every ISA.
// Tolerance 2e-5 (relative to max |o, S|), the fp32 recurrence's: measured ≤ 1e-6 on every case
// and ISA here, against both the f64 chunks and the double recurrence.
OpCase kda_chunked_vs_f64_case(KdaShape s, KdaVariant var) {
  return {"kda_chunked", kda_shape(s) + variant_name(var) + " vs f64", 2e-5,
          [s, var](std::mt19937_64& rng, Impl impl) {
            KdaData d = kda_data(rng, s, var);
            auto f64 = [](const KdaInputs& in, KdaShape sh, float* S, float* o) {
              kda_chunked_f64(in, sh, S, o, 64);
            };
            std::vector<float> got =
                maybe_flushed(var.flushed, [&] { return run_kda(kKdaChunkedOp.get(impl), d, s); });
            return Outputs{std::move(got), widen(run_kda(f64, d, s))};
          }};
}

// The varlen batch (one step's prompt chunks): sequences of the given lengths laid out in
// order with `gap` foreign rows before each (their rows of o must be kept), each with its own
// initial state; the output rows and every final state are compared. bf16: the impl runs in
// bf16 precision (on the device: single tf32 products, held to 4e-3; the cpu op ignores it).
// path (the device's): the split launches, the one-launch kernel (K3_KDA_CHUNK_FUSED=1), or the
// split ones in windows of a few chunks (a 1 MB workspace: K3_KDA_WORKSPACE_MB=1), or with
// 16-warp state-pass blocks (K3_KDA_STATE_WARPS=16).
enum class KdaPath { split, fused, windows, warps16 };
OpCase kda_batch_case(std::vector<int64_t> lens, int64_t gap, int64_t H, int64_t K, int64_t V,
                      Gates gates = Gates::mild, bool bf16 = false, KdaPath path = KdaPath::split) {
  std::string shape = "lens=";
  for (int64_t n : lens) shape += std::to_string(n) + ",";
  shape += " gap=" + std::to_string(gap) + " H=" + std::to_string(H) + " K=" + std::to_string(K) +
           " V=" + std::to_string(V) + (gates == Gates::strong ? " strong" : "") +
           (bf16 ? " bf16" : "") +
           (path == KdaPath::fused     ? " fused"
            : path == KdaPath::windows ? " windows"
            : path == KdaPath::warps16 ? " warps16"
                                       : "");
  return {"kda_chunked_batch", shape, bf16 ? 4e-3 : 2e-5, [=](std::mt19937_64& rng, Impl impl) {
            int64_t T = 0;
            std::vector<int64_t> t0;
            for (int64_t n : lens) {
              T += gap;
              t0.push_back(T);
              T += n;
            }
            const KdaShape all{std::max<int64_t>(T, 1), H, K, V};
            KdaData d = kda_data(rng, all, {gates, true});
            const int64_t state = H * K * V, m = static_cast<int64_t>(lens.size());
            std::vector<float> S = randn(rng, m * state, 0.3), S_ref = S;
            std::vector<float> o = randn(rng, all.T * H * V), o_ref = o;
            std::vector<KdaBatchSeq> seqs(lens.size()), seqs_ref(lens.size());
            for (int64_t i = 0; i < m; ++i) {
              seqs[i] = {t0[i], lens[i], S.data() + i * state};
              seqs_ref[i] = {t0[i], lens[i], S_ref.data() + i * state};
            }
            kKdaChunkedBatchOp.ref(d.in(), seqs_ref.data(), m, {0, H, K, V}, o_ref.data());
            const Precision saved = active_precision();
            if (bf16) set_precision(Precision::bf16);
            if (path == KdaPath::fused) setenv("K3_KDA_CHUNK_FUSED", "1", 1);
            if (path == KdaPath::windows) setenv("K3_KDA_WORKSPACE_MB", "1", 1);
            if (path == KdaPath::warps16) setenv("K3_KDA_STATE_WARPS", "16", 1);
            kKdaChunkedBatchOp.get(impl)(d.in(), seqs.data(), m, {0, H, K, V}, o.data());
            unsetenv("K3_KDA_CHUNK_FUSED");
            unsetenv("K3_KDA_WORKSPACE_MB");
            unsetenv("K3_KDA_STATE_WARPS");
            set_precision(saved);
            o.insert(o.end(), S.begin(), S.end());
            o_ref.insert(o_ref.end(), S_ref.begin(), S_ref.end());
            return Outputs{o, widen(o_ref)};
          }};
}

OpCase conv_case(int64_t T, int64_t C, int64_t W, int64_t split) {
  std::string shape = "T=" + std::to_string(T) + " C=" + std::to_string(C) +
                      " W=" + std::to_string(W) + " split=" + std::to_string(split);
  return {
      "conv1d_silu", shape, 1e-6, [=](std::mt19937_64& rng, Impl impl) {
        std::vector<float> x = randn(rng, T * C), w = randn(rng, C * W, 0.5);
        std::vector<float> st0 = randn(rng, C * (W - 1));
        std::vector<float> st = st0, st_ref = st0, y(T * C), y_ref(T * C);
        // The tested version sees the sequence in two pieces; the reference in one.
        Conv1dSiluFn* conv = kConv1dSiluOp.get(impl);
        conv(x.data(), w.data(), st.data(), {split, C, W}, y.data());
        conv(x.data() + split * C, w.data(), st.data(), {T - split, C, W}, y.data() + split * C);
        kConv1dSiluOp.ref(x.data(), w.data(), st_ref.data(), {T, C, W}, y_ref.data());
        y.insert(y.end(), st.begin(), st.end());
        y_ref.insert(y_ref.end(), st_ref.begin(), st_ref.end());
        return Outputs{y, widen(y_ref)};
      }};
}

// The varlen conv (one step's sequences): the given lengths with `gap` foreign rows before each
// (their y rows must be kept), each sequence with its own random history; y and every final
// history are compared with the one-sequence reference run on each sequence.
OpCase conv_batch_case(std::vector<int64_t> lens, int64_t gap, int64_t C, int64_t W,
                       int64_t tail = 0) {
  std::string shape = "lens=";
  for (int64_t n : lens) shape += std::to_string(n) + ",";
  shape += " gap=" + std::to_string(gap) + " C=" + std::to_string(C) + " W=" + std::to_string(W) +
           " tail=" + std::to_string(tail);
  return {"conv1d_silu_batch", shape, 1e-6, [=](std::mt19937_64& rng, Impl impl) {
            int64_t T = 0;
            std::vector<int64_t> t0;
            for (int64_t n : lens) {
              T += gap;
              t0.push_back(T);
              T += n;
            }
            T += tail;  // foreign rows after the last sequence
            const int64_t m = static_cast<int64_t>(lens.size()), hist = C * (W - 1);
            std::vector<float> x = randn(rng, T * C), w = randn(rng, C * W, 0.5);
            std::vector<float> st = randn(rng, m * hist), st_ref = st;
            std::vector<float> y = randn(rng, T * C), y_ref = y;
            std::vector<Conv1dSeq> seqs(lens.size()), seqs_ref(lens.size());
            for (int64_t i = 0; i < m; ++i) {
              seqs[i] = {t0[i], lens[i], st.data() + i * hist};
              seqs_ref[i] = {t0[i], lens[i], st_ref.data() + i * hist};
            }
            kConv1dSiluBatchOp.ref(x.data(), w.data(), seqs_ref.data(), m, {T, C, W}, y_ref.data());
            kConv1dSiluBatchOp.get(impl)(x.data(), w.data(), seqs.data(), m, {T, C, W}, y.data());
            y.insert(y.end(), st.begin(), st.end());
            y_ref.insert(y_ref.end(), st_ref.begin(), st_ref.end());
            return Outputs{y, widen(y_ref)};
          }};
}

// The gate as the layer feeds it: f from a projection, A_log ~ log U(1, 16), the lower bound
// −5. `in_place` writes g over f. The error scale is the largest propagated one: g = lb·σ(x),
// x = a·(f + dt), and rounding x by u·(a·(|f| + |dt|) + |x|) moves g by (1 − σ(x)) times that,
// relative. For a strongly negative x (a tiny g, alone when T·H·K = 1) that is far more than
// u·max|g|; where a large g is among the outputs the scale stays near max|g|.
OpCase kda_gate_case(KdaGateShape s, bool in_place) {
  std::string shape = "T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
                      " K=" + std::to_string(s.K) + (in_place ? " in_place" : "");
  return {"kda_gate", shape, 1e-6, [=](std::mt19937_64& rng, Impl impl) {
            const int64_t n = s.T * s.H * s.K;
            std::vector<float> f = randn(rng, n, 2.0), A_log = randu(rng, s.H, 0.0, 2.77);
            std::vector<float> dt = randn(rng, s.H * s.K, 0.5), g(n), g_ref(n);
            double scale = 0;
            for (int64_t j = 0; j < n; ++j) {  // before f is overwritten (in_place)
              const int64_t h = (j / s.K) % s.H, i = j % s.K;
              const double a = std::exp(double(A_log[h]));
              const double x = a * (double(f[j]) + dt[h * s.K + i]);
              const double sig = 1.0 / (1.0 + std::exp(-x));
              const double x_err =
                  a * (std::fabs(f[j]) + std::fabs(dt[h * s.K + i])) + std::fabs(x);
              scale = std::max(scale, std::fabs(s.lower_bound) * sig * (1.0 + (1.0 - sig) * x_err));
            }
            float* out = in_place ? f.data() : g.data();
            kKdaGateOp.ref(f.data(), A_log.data(), dt.data(), s, g_ref.data());
            kKdaGateOp.get(impl)(f.data(), A_log.data(), dt.data(), s, out);
            return Outputs{in_place ? f : g, widen(g_ref), scale};
          }};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  for (KdaShape s : {KdaShape{1, 1, 8, 8},
                     {1, 3, 16, 16},
                     {2, 1, 1, 1},
                     {63, 2, 16, 16},
                     {64, 2, 16, 16},
                     {65, 2, 16, 8},
                     {130, 3, 32, 32},
                     {200, 1, 16, 24},
                     {3, 2, 16, 64},  // V 64, 128, 256: the AVX-512 step's register widths
                     {5, 1, 9, 128},
                     {2, 1, 4, 256}}) {
    v.push_back(kda_case("kda_chunked", kKdaChunkedOp, s));
    v.push_back(kda_case("kda_recurrent", kKdaRecurrentOp, s));
  }
  // The fp32 chunked form: T = 1, 2, chunk ± 1, several chunks; odd heads and dims; the
  // release's head dims; strong gates (decays underflow, unfactorisable sub-chunks); S0 = 0.
  for (KdaShape s : {KdaShape{1, 1, 5, 7},
                     {2, 3, 17, 9},
                     {15, 1, 3, 33},
                     {17, 2, 31, 16},
                     {63, 3, 32, 32},
                     {64, 1, 128, 128},
                     {65, 5, 24, 40},
                     {129, 2, 64, 64},
                     {200, 3, 19, 23}}) {
    for (KdaVariant var : {KdaVariant{Gates::mild, true},
                           {Gates::strong, true},
                           {Gates::mild, false},
                           {Gates::strong, false}}) {
      v.push_back(kda_case("kda_chunked", kKdaChunkedOp, s, var));
      v.push_back(kda_chunked_vs_f64_case(s, var));
    }
  }
  // As the engine runs them: subnormals flushed (core/fp_env.h), strong gates making many.
  for (KdaShape s : {KdaShape{17, 2, 31, 16}, {64, 1, 128, 128}, {200, 3, 19, 23}}) {
    for (Gates gates : {Gates::mild, Gates::strong}) {
      for (bool s0 : {true, false}) {
        v.push_back(kda_case("kda_chunked", kKdaChunkedOp, s, {gates, s0, true}));
        v.push_back(kda_case("kda_recurrent", kKdaRecurrentOp, s, {gates, s0, true}));
      }
    }
  }
  // Varlen batches: 1–16 sequences, empty and one-token ones, T < 64, T not a multiple of 64,
  // several chunks, foreign rows between sequences; the release's head dims; strong gates.
  v.push_back(kda_batch_case({1}, 0, 1, 8, 8));
  v.push_back(kda_batch_case({0}, 1, 2, 16, 16));
  v.push_back(kda_batch_case({37}, 0, 2, 128, 128));
  v.push_back(kda_batch_case({64, 0, 3}, 2, 2, 32, 24));
  v.push_back(kda_batch_case({130, 65, 1, 0, 63}, 1, 3, 17, 70));
  v.push_back(kda_batch_case({200, 5}, 3, 1, 128, 128, Gates::strong));
  v.push_back(kda_batch_case({129, 2, 77}, 0, 2, 128, 64, Gates::strong));
  for (Gates gates : {Gates::mild, Gates::strong}) {  // bf16 precision (tf32 products)
    v.push_back(kda_batch_case({37}, 0, 2, 128, 128, gates, true));
    v.push_back(kda_batch_case({640, 5, 130}, 1, 2, 128, 128, gates, true));
    v.push_back(kda_batch_case({130, 65, 1, 0, 63}, 1, 3, 17, 70, gates, true));
    for (bool bf16 : {false, true}) {
      for (KdaPath path : {KdaPath::fused, KdaPath::windows, KdaPath::warps16}) {
        v.push_back(kda_batch_case({640, 5, 130}, 1, 2, 128, 128, gates, bf16, path));
        v.push_back(kda_batch_case({130, 65, 1, 0, 63}, 1, 3, 17, 70, gates, bf16, path));
      }
    }
  }
  v.push_back(
      kda_batch_case({9, 31, 0, 64, 100, 1, 17, 45, 3, 128, 0, 70, 12, 66, 5, 90}, 1, 2, 64, 40));
  v.push_back(kda_batch_case({300, 11}, 0, 1, 200, 16));  // K > 128: the token-serial kernel
  for (auto [T, C, W, split] : {std::tuple{1, 5, 4, 0},
                                {9, 12, 4, 4},
                                {20, 7, 2, 19},
                                {33, 64, 4, 1},
                                {6, 3, 1, 3},
                                {1, 1, 4, 1},
                                {300, 40, 4, 150},
                                {37, 150, 4, 10},  // channel blocks of 64 and a tail
                                {5, 200, 3, 2}}) {
    v.push_back(conv_case(T, C, W, split));
  }
  // Varlen conv: no sequences, one, empty ones, one-token (decode) rows, rows shorter than the
  // history, foreign rows between; channel tails past 64 and 128; W = 1 (no history) to 8;
  // 64 decode sequences at the release's width (12288 channels).
  v.push_back(conv_batch_case({}, 0, 8, 4, 3));
  v.push_back(conv_batch_case({1}, 0, 1, 4));
  v.push_back(conv_batch_case({0}, 2, 5, 4, 1));
  v.push_back(conv_batch_case({2, 0, 1}, 1, 130, 4));
  v.push_back(conv_batch_case({7, 1, 33, 2}, 3, 70, 2));
  v.push_back(conv_batch_case({5, 9}, 0, 200, 1));
  v.push_back(conv_batch_case({40, 3, 1}, 2, 257, 8));
  v.push_back(conv_batch_case(std::vector<int64_t>(64, 1), 0, 12288, 4));
  v.push_back(conv_batch_case({300, 1, 1, 17}, 0, 96, 4));
  for (KdaGateShape s : {KdaGateShape{1, 1, 1, -5.0f},
                         {1, 3, 16, -5.0f},
                         {7, 2, 17, -5.0f},
                         {5, 96, 128, -5.0f}}) {  // above the threading threshold
    v.push_back(kda_gate_case(s, false));
    v.push_back(kda_gate_case(s, true));
  }
  return v;
}

static Register reg(cases());

// Release shapes: 96 heads x 128, one prefill chunk (chunked: the fp32 form and the double one it
// replaced) and one decode step (recurrent).
PerfCase kda_perf(KdaShape s, const char* name, KdaFn* fn) {
  const double state_bytes = 4.0 * s.H * s.K * s.V;
  const bool chunked = s.T > 1;
  const double flops =
      chunked ? s.H * (4.0 * s.T * s.T * s.K + 6.0 * s.T * s.K * s.V) : s.T * s.H * 8.0 * s.K * s.V;
  return {name, kda_shape(s), flops, state_bytes,
          [=](std::mt19937_64& rng) -> std::function<void()> {
            auto d = std::make_shared<KdaData>(kda_data(rng, s));
            auto o = std::make_shared<std::vector<float>>(s.T * s.H * s.V);
            auto S = std::make_shared<std::vector<float>>(d->S0);
            return [=] { fn(d->in(), s, S->data(), o->data()); };
          }};
}

void kda_chunked_f64_64(const KdaInputs& in, KdaShape s, float* S, float* o) {
  kda_chunked_f64(in, s, S, o, 64);
}
void kda_chunked_cpu(const KdaInputs& in, KdaShape s, float* S, float* o) {
  kKdaChunkedOp.cpu(in, s, S, o);
}
void kda_recurrent_cpu(const KdaInputs& in, KdaShape s, float* S, float* o) {
  kKdaRecurrentOp.cpu(in, s, S, o);
}

static RegisterPerf perf({kda_perf({64, 96, 128, 128}, "kda_chunked", kda_chunked_cpu),
                          kda_perf({64, 96, 128, 128}, "kda_chunked_f64", kda_chunked_f64_64),
                          kda_perf({512, 8, 128, 128}, "kda_chunked", kda_chunked_cpu),
                          kda_perf({512, 8, 128, 128}, "kda_chunked_f64", kda_chunked_f64_64),
                          kda_perf({512, 4, 32, 32}, "kda_chunked", kda_chunked_cpu),
                          kda_perf({512, 4, 32, 32}, "kda_chunked_f64", kda_chunked_f64_64),
                          kda_perf({1, 96, 128, 128}, "kda_recurrent", kda_recurrent_cpu)});

// Chunk sizes other than the registered 64 (one token, an odd tail) against the recurrence.
TEST(KdaChunked, OtherChunkSizesMatchTheRecurrence) {
  for (int64_t chunk : {1, 16, 37}) {
    const KdaShape s{37, 2, 16, 16};
    std::mt19937_64 rng(0xc4 + chunk);
    KdaData d = kda_data(rng, s);
    auto chunked = [&](const KdaInputs& in, KdaShape sh, float* S, float* o) {
      kda_chunked(in, sh, S, o, chunk);
    };
    const std::vector<float> got = run_kda(chunked, d, s);
    EXPECT_LE(rel_max_error(got, widen(run_kda(kda_recurrent_ref, d, s))), 2e-5) << chunk;
  }
}

// The gate (its sigmoid through fast_math.h's e^x) elementwise against the float64 reference,
// within 1e-6 of the lower bound, with decay rates up to e^4.5 so that many arguments saturate
// either way.
TEST(KdaGate, WithinOneMillionthOfTheBoundOfTheReference) {
  std::mt19937_64 rng(5);
  const KdaGateShape s{3, 4, 24, -5.0f};
  std::vector<float> f = randn(rng, 3 * 4 * 24, 2.0), A = randu(rng, 4, 0.0, 4.5);
  std::vector<float> dt = randn(rng, 4 * 24, 0.5), g(f.size()), ref(f.size());
  kda_gate(f.data(), A.data(), dt.data(), s, g.data());
  kda_gate_ref(f.data(), A.data(), dt.data(), s, ref.data());
  for (size_t j = 0; j < g.size(); ++j)
    ASSERT_NEAR(g[j], ref[j], 1e-6 * std::abs(s.lower_bound)) << j;
}

}  // namespace
}  // namespace k3::test
