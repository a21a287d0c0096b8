// Gated NoPE MLA sublayer (spec §4): LoRA query, latent KV (cached as ĉ ‖ r), attention in
// the expanded form for prefill or the absorbed form for decode, sigmoid output gate, o_proj.
#include <cmath>
#include <vector>

#include "model/layers.h"
#include "ops/mla/mla.h"
#include "ops/norm/norm.h"

namespace k3 {
namespace {

using Buf = std::vector<float>;

// Expands cached latents to per-head keys [S, H, Dn+Dr] and values [S, H, Dv].
void expand_kv(const MlaCache& cache, int64_t S, const MlaWeights& w, const MlaHParams& m, Buf& k,
               Buf& v) {
  const int64_t Dc = m.kv_lora_rank, Dr = m.qk_rope, Dn = m.qk_nope, Dv = m.v_head, H = m.n_head;
  Buf latent(S * Dc), kv(S * w.kv_b.rows);  // [S, Dc], [S, H, Dn+Dv]
  for (int64_t t = 0; t < S; ++t) {
    for (int64_t c = 0; c < Dc; ++c) latent[t * Dc + c] = cache.rows[t * (Dc + Dr) + c];
  }
  linear(latent.data(), S, w.kv_b, kv.data());
  k.resize(S * H * (Dn + Dr));
  v.resize(S * H * Dv);
  for (int64_t t = 0; t < S; ++t) {
    const float* r = &cache.rows[t * (Dc + Dr) + Dc];
    for (int64_t h = 0; h < H; ++h) {
      const float* src = &kv[(t * H + h) * (Dn + Dv)];
      float* kd = &k[(t * H + h) * (Dn + Dr)];
      for (int64_t i = 0; i < Dn; ++i) kd[i] = src[i];
      for (int64_t i = 0; i < Dr; ++i) kd[Dn + i] = r[i];  // shared by all heads
      for (int64_t j = 0; j < Dv; ++j) v[(t * H + h) * Dv + j] = src[Dn + j];
    }
  }
}

}  // namespace

void mla_layer(const float* x, int64_t T, const MlaWeights& w, const HParams& hp, MlaCache& cache,
               int64_t n_past, Pass pass, float* out) {
  const MlaHParams& m = hp.mla;
  const int64_t H = m.n_head, Dn = m.qk_nope, Dr = m.qk_rope, Dv = m.v_head, Dc = m.kv_lora_rank;

  Buf cq(T * m.q_lora_rank), q(T * H * (Dn + Dr));  // [T, q_lora], [T, H, Dn+Dr]
  linear(x, T, w.q_a, cq.data());
  rms_norm(cq.data(), T, m.q_lora_rank, w.q_a_norm.data(), hp.mla_lora_eps, cq.data());
  linear(cq.data(), T, w.q_b, q.data());

  Buf a(T * (Dc + Dr));  // [T, Dc+Dr]: latent c, then r (r is not normalised)
  linear(x, T, w.kv_a, a.data());
  for (int64_t t = 0; t < T; ++t) {  // rows are Dc+Dr apart: normalise each c on its own
    rms_norm(&a[t * (Dc + Dr)], 1, Dc, w.kv_a_norm.data(), hp.mla_lora_eps, &a[t * (Dc + Dr)]);
  }
  cache.rows.insert(cache.rows.end(), a.begin(), a.end());

  Buf o(T * H * Dv);  // [T, H, Dv]
  const MlaShape s{T, n_past, H, Dn, Dr, Dv, Dc};
  if (pass == Pass::prefill) {
    Buf k, v;
    expand_kv(cache, n_past + T, w, m, k, v);
    mla_attention_expanded(q.data(), k.data(), v.data(), s, o.data());
  } else {
    mla_attention_absorbed(q.data(), cache.rows.data(), w.kv_b, s, o.data());
  }
  Buf gate(T * H * Dv);
  linear(x, T, w.g, gate.data());
  for (size_t i = 0; i < o.size(); ++i) o[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
  linear(o.data(), T, w.o, out);
}

}  // namespace k3
