#include "model/forward.h"

#include <vector>

#include "core/error.h"
#include "ops/attn_res/attn_res.h"
#include "ops/norm/norm.h"

namespace k3 {
namespace {

using Buf = std::vector<float>;

// The AttnRes residual stream of a forward pass: sealed slots B and the prefix sum P.
struct Residual {
  std::vector<Buf> slots;  // each [T, d]
  Buf P;                   // [T, d]; empty right after a seal
  int64_t T, d;

  // Mix(P, B) over [slots..., P] (P last, when present).
  void mix(const Vec& w, float eps, float* out) const {
    std::vector<const float*> c;
    for (const Buf& s : slots) c.push_back(s.data());
    if (!P.empty()) c.push_back(P.data());
    attn_res_mix(c.data(), {static_cast<int64_t>(c.size()), T, d}, w.data(), eps, out);
  }
  void add(const Buf& x) {
    if (P.empty()) {
      P = x;
    } else {
      for (size_t i = 0; i < P.size(); ++i) P[i] += x[i];
    }
  }
};

void embed(const Mat& table, const int64_t* ids, int64_t T, int64_t vocab, float* h) {
  for (int64_t t = 0; t < T; ++t) {
    check(ids[t] >= 0 && ids[t] < vocab, "token id ", ids[t], " at position ", t,
          " is outside the vocabulary [0, ", vocab, ")");
  }
  for (int64_t t = 0; t < T; ++t) mat_row(table, ids[t], h + t * table.cols);
}

}  // namespace

void forward(const ModelWeights& w, const HParams& hp, SequenceState& st, const int64_t* ids,
             int64_t T, Pass pass, float* logits) {
  const int64_t d = hp.d_model;
  Residual res{{}, Buf(T * d), T, d};
  embed(w.embed, ids, T, hp.vocab, res.P.data());  // P = h  [T, d]
  Buf a(T * d), x(T * d), y(T * d);
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& lw = w.layers[l];
    // 1-2. pre-attention mix (none in layer 0), then seal the block's prefix sum.
    if (res.slots.empty()) {
      a = res.P;
    } else {
      res.mix(lw.attn_res, hp.rms_eps, a.data());
    }
    if (hp.seals_slot(l)) {
      res.slots.push_back(std::move(res.P));
      res.P.clear();
    }
    // 3-4. attention on the normalised mix; P += A.
    rms_norm(a.data(), T, d, lw.attn_norm.data(), hp.rms_eps, x.data());
    if (hp.attn_kind[l] == AttnKind::kda) {
      kda_layer(x.data(), T, lw.kda, hp, st.kda[l], pass, y.data());
    } else {
      mla_layer(x.data(), T, lw.mla, hp, st.mla[l], st.n_past, pass, y.data());
    }
    res.add(y);
    // 5-7. FFN on the normalised MLP-side mix; P += F.
    res.mix(lw.mlp_res, hp.rms_eps, a.data());
    rms_norm(a.data(), T, d, lw.ffn_norm.data(), hp.rms_eps, x.data());
    if (hp.is_moe_layer(l)) {
      moe_block(x.data(), T, lw.moe, hp, y.data());
    } else {
      dense_ffn(x.data(), T, lw.dense, hp, y.data());
    }
    res.add(y);
  }
  res.mix(w.out_res, hp.rms_eps, a.data());  // final mix over all slots + P
  rms_norm(a.data(), T, d, w.norm.data(), hp.rms_eps, x.data());
  linear(x.data(), T, w.lm_head, logits);
  st.n_past += T;
}

}  // namespace k3
