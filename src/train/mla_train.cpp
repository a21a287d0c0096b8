// Gated NoPE MLA sublayer for training (spec §4): LoRA query, latent KV, the expanded causal
// attention over the sequence's own tokens, sigmoid output gate, o_proj; and its backward.
#include "ops/elementwise/elementwise.h"
#include "ops/mla/mla.h"
#include "train/layers_train.h"

namespace k3::train {

void mla_fwd(const Scope& s, const HParams& hp, const Buf& x, int64_t T, MlaTape& t, Buf& out) {
  const MlaHParams& m = hp.mla;
  const int64_t H = m.n_head, Dn = m.qk_nope, Dr = m.qk_rope, Dv = m.v_head, Dc = m.kv_lora_rank;
  const int64_t Dq = Dn + Dr, Dkv = Dn + Dv, Da = Dc + Dr;
  t.cq0 = linear_fwd(x, T, s("q_a_proj.weight"));  // [T, Lq]
  t.cq = rms_fwd(t.cq0, m.q_lora_rank, s("q_a_layernorm.weight"), hp.mla_lora_eps);
  t.q = linear_fwd(t.cq, T, s("q_b_proj.weight"));         // [T, H, Dq]
  t.a = linear_fwd(x, T, s("kv_a_proj_with_mqa.weight"));  // [T, Dc + Dr]
  t.c0 = zeros(T * Dc);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t i = 0; i < Dc; ++i) t.c0[r * Dc + i] = t.a[r * Da + i];
  t.c = rms_fwd(t.c0, Dc, s("kv_a_layernorm.weight"), hp.mla_lora_eps);
  const Buf kv = linear_fwd(t.c, T, s("kv_b_proj.weight"));  // [T, H, Dn + Dv]
  t.k = zeros(T * H * Dq), t.v = zeros(T * H * Dv);
  for (int64_t r = 0; r < T; ++r) {  // k_h = [k^N_h ; r] (r shared by the heads)
    for (int64_t h = 0; h < H; ++h) {
      const float* src = &kv[(r * H + h) * Dkv];
      float* kh = &t.k[(r * H + h) * Dq];
      for (int64_t i = 0; i < Dn; ++i) kh[i] = src[i];
      for (int64_t i = 0; i < Dr; ++i) kh[Dn + i] = t.a[r * Da + Dc + i];
      for (int64_t j = 0; j < Dv; ++j) t.v[(r * H + h) * Dv + j] = src[Dn + j];
    }
  }
  t.o = zeros(T * H * Dv);
  kMlaExpandedOp.get(s.impl)(t.q.data(), t.k.data(), t.v.data(), {T, 0, H, Dn, Dr, Dv, Dc},
                             t.o.data());
  t.gate = linear_fwd(x, T, s("g_proj.weight"));
  t.og = zeros(T * H * Dv);
  kMulSigmoidOp.get(s.impl)(t.o.data(), t.gate.data(), T * H * Dv, t.og.data());
  out = linear_fwd(t.og, T, s("o_proj.weight"));
}

void mla_back(const Scope& s, const HParams& hp, const Buf& x, int64_t T, const MlaTape& t,
              const Buf& dout, Buf& dx) {
  const MlaHParams& m = hp.mla;
  const int64_t H = m.n_head, Dn = m.qk_nope, Dr = m.qk_rope, Dv = m.v_head, Dc = m.kv_lora_rank;
  const int64_t Dq = Dn + Dr, Dkv = Dn + Dv, Da = Dc + Dr, n = T * H * Dv;
  Buf dog = zeros(n), d_o = zeros(n), dgate = zeros(n);
  linear_back(t.og, T, s("o_proj.weight"), dout, &dog);
  kMulSigmoidOp.bwd(t.o.data(), t.gate.data(), n, dog.data(), d_o.data(), dgate.data());
  linear_back(x, T, s("g_proj.weight"), dgate, &dx);

  Buf dq = zeros(T * H * Dq), dk = zeros(T * H * Dq), dv = zeros(n);
  kMlaExpandedOp.bwd(t.q.data(), t.k.data(), t.v.data(), {T, 0, H, Dn, Dr, Dv, Dc}, d_o.data(),
                     dq.data(), dk.data(), dv.data());
  Buf dkv = zeros(T * H * Dkv), da = zeros(T * Da);
  for (int64_t r = 0; r < T; ++r) {
    for (int64_t h = 0; h < H; ++h) {
      float* d = &dkv[(r * H + h) * Dkv];
      const float* dkh = &dk[(r * H + h) * Dq];
      for (int64_t i = 0; i < Dn; ++i) d[i] = dkh[i];
      for (int64_t i = 0; i < Dr; ++i) da[r * Da + Dc + i] += dkh[Dn + i];
      for (int64_t j = 0; j < Dv; ++j) d[Dn + j] = dv[(r * H + h) * Dv + j];
    }
  }
  Buf dc = zeros(T * Dc), dc0 = zeros(T * Dc);
  linear_back(t.c, T, s("kv_b_proj.weight"), dkv, &dc);
  rms_back(t.c0, Dc, s("kv_a_layernorm.weight"), hp.mla_lora_eps, dc, dc0);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t i = 0; i < Dc; ++i) da[r * Da + i] += dc0[r * Dc + i];
  linear_back(x, T, s("kv_a_proj_with_mqa.weight"), da, &dx);

  Buf dcq = zeros(T * m.q_lora_rank), dcq0 = zeros(T * m.q_lora_rank);
  linear_back(t.cq, T, s("q_b_proj.weight"), dq, &dcq);
  rms_back(t.cq0, m.q_lora_rank, s("q_a_layernorm.weight"), hp.mla_lora_eps, dcq, dcq0);
  linear_back(x, T, s("q_a_proj.weight"), dcq0, &dx);
}

}  // namespace k3::train
