#include "cost/params.h"

#include <algorithm>

namespace k3::cost {
namespace {

// KDA sequence mixer, spec §3.1: q/k/v, three conv taps (F32), f_a/f_b, A_log, dt_bias, b_proj,
// full-rank g_proj, o_norm, o_proj. A_log is stored padded to head_dim entries (the release
// stores [128] for 96 heads; the public golden checkpoints pad to head_dim as well); we count
// max(n_head, head_dim) in case a variant has more heads than head dims.
int64_t kda_layer_params(const HParams& hp) {
  const KdaHParams& k = hp.kda;
  const int64_t d = hp.d_model, p = k.proj_dim();
  int64_t qkv = 3 * p * d;
  int64_t conv = 3 * p * k.conv_kernel;
  int64_t decay = k.head_dim * d + p * k.head_dim;  // f_a [K, d], f_b [P, K]
  int64_t a_log = std::max(k.n_head, k.head_dim);
  int64_t beta = k.n_head * d;
  int64_t out = p * d + k.head_dim + d * p;  // g_proj, o_norm, o_proj
  return qkv + conv + decay + a_log + p + beta + out;
}

// Gated MLA, spec §4.1.
int64_t mla_layer_params(const HParams& hp) {
  const MlaHParams& a = hp.mla;
  const int64_t d = hp.d_model, h = a.n_head;
  int64_t q = a.q_lora_rank * d + a.q_lora_rank + h * a.qk_head() * a.q_lora_rank;
  int64_t kv = a.cache_width() * d + a.kv_lora_rank + h * (a.qk_nope + a.v_head) * a.kv_lora_rank;
  int64_t out = h * a.v_head * d * 2;  // g_proj [H*dv, d] and o_proj [d, H*dv]
  return q + kv + out;
}

MoeLayerParams moe_layer_params(const HParams& hp) {
  const MoeHParams& m = hp.moe;
  const int64_t d = hp.d_model, l = m.d_latent;
  MoeLayerParams p;
  if (m.n_expert == 0) return p;
  p.router = m.n_expert * d + m.n_expert;
  p.latent_proj = 2 * d * l;
  p.latent_norm = l;
  p.expert = 3 * l * m.d_expert;
  p.n_expert = m.n_expert;
  p.n_used = m.n_used;
  p.shared = 3 * d * m.n_shared * m.d_expert;
  return p;
}

}  // namespace

int64_t ParamCounts::total() const {
  return embed + lm_head + n_kda * kda_layer + n_mla * mla_layer + n_dense * dense_ffn +
         n_moe * moe.total() + n_layer * layer_glue + model_glue;
}

int64_t ParamCounts::active() const {
  return total() - n_moe * (moe.routed_all() - moe.routed_active());
}

int64_t ParamCounts::active_without_embed() const { return active() - embed; }

ParamCounts param_counts(const HParams& hp) {
  ParamCounts c;
  const int64_t d = hp.d_model;
  c.embed = hp.vocab * d;
  c.lm_head = hp.vocab * d;
  c.kda_layer = kda_layer_params(hp);
  c.mla_layer = mla_layer_params(hp);
  c.dense_ffn = 3 * d * hp.d_ff;
  c.moe = moe_layer_params(hp);
  c.layer_glue = 6 * d;
  c.model_glue = 3 * d;
  c.n_layer = hp.n_layer;
  c.n_kda = hp.n_layers_of(AttnKind::kda);
  c.n_mla = hp.n_layers_of(AttnKind::mla);
  for (int64_t l = 0; l < hp.n_layer; ++l) (hp.is_moe_layer(l) ? c.n_moe : c.n_dense) += 1;
  return c;
}

LatentBudget latent_budget(const HParams& hp) {
  const MoeHParams& m = hp.moe;
  LatentBudget b;
  if (m.n_expert == 0) return b;
  const double d = static_cast<double>(hp.d_model), l = static_cast<double>(m.d_latent);
  const double mi = static_cast<double>(m.d_expert);
  b.alpha = d / l;
  b.full_n_expert = static_cast<double>(m.n_expert) / b.alpha;
  b.full_n_used = static_cast<double>(m.n_used) / b.alpha;
  b.full_active = b.full_n_used * 3 * d * mi;
  b.full_total = b.full_n_expert * 3 * d * mi;
  b.latent_active = static_cast<double>(m.n_used) * 3 * l * mi;
  b.latent_total = static_cast<double>(m.n_expert) * 3 * l * mi;
  b.projections = 2 * d * l;
  b.projection_fraction = b.projections / b.latent_active;
  b.shared = static_cast<double>(m.n_shared) * 3 * d * mi;
  b.sparsity = static_cast<double>(m.n_expert) / static_cast<double>(m.n_used);
  return b;
}

}  // namespace k3::cost
