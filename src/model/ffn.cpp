// FFNs (spec §6): the dense SiTU-GLU FFN and Stable LatentMoE (router on the full-width x,
// latent down-projection, routed experts, fp32 weighted combine, RMSNorm, up-projection,
// plus shared experts on the full-width x).
#include <algorithm>
#include <vector>

#include "model/layers.h"
#include "ops/moe/router.h"
#include "ops/norm/norm.h"
#include "ops/situ/situ.h"

namespace k3 {
namespace {

using Buf = std::vector<float>;

SituParams situ_params(const HParams& hp) { return {hp.situ_beta, hp.situ_linear_beta}; }

// out [T, w.down.rows] = down(φ(gate·x, up·x)); x [T, w.gate.cols].
void glu_ffn(const float* x, int64_t T, const FfnWeights& w, SituParams p, float* out) {
  const int64_t I = w.gate.rows;
  Buf a(T * I), b(T * I);  // [T, I]
  linear(x, T, w.gate, a.data());
  linear(x, T, w.up, b.data());
  situ_glu(a.data(), b.data(), T * I, p, a.data());
  linear(a.data(), T, w.down, out);
}

}  // namespace

void dense_ffn(const float* x, int64_t T, const FfnWeights& w, const HParams& hp, float* out) {
  glu_ffn(x, T, w, situ_params(hp), out);
}

void moe_block(const float* x, int64_t T, const MoeWeights& w, const HParams& hp, float* out) {
  const MoeHParams& m = hp.moe;
  const int64_t d = hp.d_model, L = m.d_latent, E = m.n_expert, k = m.n_used;
  // Routing [T, k], from fp32 logits.
  Buf logits(T * E);
  linear(x, T, w.router, logits.data());
  std::vector<int32_t> sel(T * k);
  Buf weight(T * k);
  const RouterParams rp{E, k, m.renormalize, m.routed_scale};
  for (int64_t t = 0; t < T; ++t) {
    route_token(&logits[t * E], w.router_bias.data(), rp, &sel[t * k], &weight[t * k]);
  }
  // Latent down-projection z [T, L]; tokens grouped per expert; combine c [T, L] in fp32.
  Buf z(T * L), c(T * L, 0.0f);
  linear(x, T, w.latent_down, z.data());
  std::vector<std::vector<int64_t>> slots(E);  // expert -> indices into sel (t*k + j)
  for (int64_t i = 0; i < T * k; ++i) slots[sel[i]].push_back(i);
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int64_t>& idx = slots[e];
    if (idx.empty()) continue;
    const int64_t n = static_cast<int64_t>(idx.size());
    Buf zin(n * L), y(n * L);  // [n, L]
    for (int64_t r = 0; r < n; ++r) {
      std::copy_n(&z[(idx[r] / k) * L], L, &zin[r * L]);
    }
    glu_ffn(zin.data(), n, w.experts[e], situ_params(hp), y.data());
    for (int64_t r = 0; r < n; ++r) {
      const float wt = weight[idx[r]];
      float* cr = &c[(idx[r] / k) * L];
      for (int64_t j = 0; j < L; ++j) cr[j] += wt * y[r * L + j];
    }
  }
  rms_norm(c.data(), T, L, w.latent_norm.data(), hp.rms_eps, c.data());
  linear(c.data(), T, w.latent_up, out);  // [T, d]
  if (!w.shared.gate.empty()) {
    Buf sh(T * d);
    glu_ffn(x, T, w.shared, situ_params(hp), sh.data());
    for (int64_t i = 0; i < T * d; ++i) out[i] += sh[i];
  }
}

}  // namespace k3
