#include "model/state.h"

#include <algorithm>

namespace k3 {

SequenceState::SequenceState(const HParams& hp) {
  kda.resize(static_cast<size_t>(hp.n_layer));
  mla.resize(static_cast<size_t>(hp.n_layer));
  const size_t P = static_cast<size_t>(hp.kda.proj_dim());
  const size_t hist = static_cast<size_t>(hp.kda.conv_kernel - 1);
  const size_t s = static_cast<size_t>(hp.kda.n_head * hp.kda.head_dim * hp.kda.head_dim);
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    if (hp.attn_kind[l] != AttnKind::kda) continue;
    KdaState& k = kda[l];
    k.conv_q.assign(P * hist, 0.0f);
    k.conv_k.assign(P * hist, 0.0f);
    k.conv_v.assign(P * hist, 0.0f);
    k.S.assign(s, 0.0f);
  }
}

void SequenceState::reset() {
  n_past = 0;
  for (KdaState& k : kda) {
    for (auto* v : {&k.conv_q, &k.conv_k, &k.conv_v, &k.S}) std::fill(v->begin(), v->end(), 0.0f);
  }
  for (MlaCache& m : mla) m.rows.clear();
}

size_t SequenceState::bytes() const {
  size_t n = 0;
  for (const KdaState& k : kda)
    n += 4 * (k.conv_q.size() + k.conv_k.size() + k.conv_v.size() + k.S.size());
  for (const MlaCache& m : mla) n += 4 * m.rows.size();
  return n;
}

}  // namespace k3
