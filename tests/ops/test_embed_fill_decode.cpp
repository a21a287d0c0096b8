// The ops the device backend needed as registry ops: the embedding lookup (BF16 and F32
// tables), fill, and the batched KDA decode step (many single-token sequences, each with its
// own state, rows in any order) against their references.
#include <gtest/gtest.h>

#include <cstring>

#include "core/bf16.h"
#include "ops/embed/embed.h"
#include "ops/fill/fill.h"
#include "ops/harness.h"
#include "ops/kda/kda.h"
#include "ops/norm/norm.h"

namespace k3::test {
namespace {

OpCase embed_case(int64_t V, int64_t d, int64_t T, MatFormat fmt) {
  const std::string shape = "V=" + std::to_string(V) + " d=" + std::to_string(d) +
                            " T=" + std::to_string(T) + (fmt == MatFormat::bf16 ? " bf16" : " f32");
  return {"embed", shape, 0, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> table = randn(rng, V * d);
            std::vector<uint16_t> packed(table.size());
            for (size_t i = 0; i < table.size(); ++i) packed[i] = f32_to_bf16(table[i]);
            const Mat m{V, d, fmt,
                        fmt == MatFormat::bf16 ? static_cast<const void*>(packed.data())
                                               : static_cast<const void*>(table.data()),
                        nullptr};
            std::uniform_int_distribution<int64_t> id(0, V - 1);
            std::vector<int64_t> ids(T);
            for (int64_t& i : ids) i = id(rng);
            std::vector<float> got(T * d, NAN), want(T * d);
            kEmbedOp.ref(m, ids.data(), T, want.data());
            kEmbedOp.get(impl)(m, ids.data(), T, got.data());
            return Outputs{got, widen(want)};
          }};
}

OpCase fill_case(int64_t n) {
  return {"fill", "n=" + std::to_string(n), 0, [=](std::mt19937_64& rng, Impl impl) {
            std::vector<float> got = randn(rng, n), want(n);
            const float value = std::uniform_real_distribution<float>(-2, 2)(rng);
            kFillOp.ref(want.data(), n, value);
            kFillOp.get(impl)(got.data(), n, value);
            return Outputs{got, widen(want), 1.0};
          }};
}

// n sequences, each one token at a distinct random row of a T-row step (T >= n), each with a
// random initial state; returns the outputs of their rows and the final states.
OpCase kda_decode_case(int64_t n, int64_t T, KdaShape s) {
  const std::string shape = "n=" + std::to_string(n) + " T=" + std::to_string(T) +
                            " H=" + std::to_string(s.H) + " K=" + std::to_string(s.K) +
                            " V=" + std::to_string(s.V);
  return {"kda_decode", shape, 2e-5, [=](std::mt19937_64& rng, Impl impl) {
            const int64_t H = s.H, K = s.K, V = s.V;
            std::vector<float> q = randn(rng, T * H * K), k = randn(rng, T * H * K);
            l2_norm(q.data(), T * H, K, 1e-6f);
            l2_norm(k.data(), T * H, K, 1e-6f);
            std::vector<float> v = randn(rng, T * H * V), g = randu(rng, T * H * K, -2.0, -1e-3);
            std::vector<float> beta = randu(rng, T * H, 0.05, 0.95);
            std::vector<int64_t> rows(T);
            for (int64_t i = 0; i < T; ++i) rows[i] = i;
            std::shuffle(rows.begin(), rows.end(), rng);
            std::vector<float> S0 = randn(rng, n * H * K * V, 0.3), S = S0, S_ref = S0;
            std::vector<KdaDecodeSeq> seqs(n), seqs_ref(n);
            for (int64_t i = 0; i < n; ++i) {
              seqs[i] = {rows[i], S.data() + i * H * K * V};
              seqs_ref[i] = {rows[i], S_ref.data() + i * H * K * V};
            }
            const KdaInputs in{q.data(), k.data(), v.data(), g.data(), beta.data()};
            std::vector<float> o(T * H * V, 0.0f), o_ref(T * H * V, 0.0f);
            kKdaDecodeOp.ref(in, seqs_ref.data(), n, {0, H, K, V}, o_ref.data());
            kKdaDecodeOp.get(impl)(in, seqs.data(), n, {0, H, K, V}, o.data());
            o.insert(o.end(), S.begin(), S.end());
            o_ref.insert(o_ref.end(), S_ref.begin(), S_ref.end());
            return Outputs{o, widen(o_ref)};
          }};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  for (MatFormat f : {MatFormat::bf16, MatFormat::f32}) {
    v.push_back(embed_case(1, 1, 1, f));
    v.push_back(embed_case(50, 24, 7, f));
    v.push_back(embed_case(300, 130, 33, f));
  }
  for (int64_t n : {1, 17, 4099}) v.push_back(fill_case(n));
  v.push_back(kda_decode_case(1, 1, {0, 1, 8, 8}));
  v.push_back(kda_decode_case(3, 5, {0, 2, 16, 16}));
  v.push_back(kda_decode_case(9, 9, {0, 3, 32, 24}));
  v.push_back(kda_decode_case(4, 4, {0, 2, 128, 128}));
  v.push_back(kda_decode_case(2, 3, {0, 2, 16, 13}));   // V % 4 != 0: the scalar kernel
  v.push_back(kda_decode_case(2, 2, {0, 1, 256, 12}));  // 16 rows per thread
  v.push_back(kda_decode_case(1, 2, {0, 1, 200, 7}));   // scalar, 25 rows per thread
  v.push_back(kda_decode_case(70, 70, {0, 1, 4, 4}));   // more sequences than one launch takes
  // Enough blocks for the float4 kernel's 16-lane rows (the cases above get its 8-lane rows
  // on a 132-SM card): full width, and columns that end inside a block's tile.
  v.push_back(kda_decode_case(40, 41, {0, 4, 128, 128}));
  v.push_back(kda_decode_case(40, 40, {0, 4, 96, 68}));
  return v;
}

static Register reg(cases());

}  // namespace
}  // namespace k3::test
