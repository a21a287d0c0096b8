#include "cost/params.h"

#include <map>
#include <utility>

#include "k3/error.h"
#include "k3/weight_table.h"

namespace k3::cost {
namespace {

// The ParamCounts field an entry adds to: its role (as `k3 inspect` groups them), with the
// latent norm told apart from the latent projections by its slot. A_log counts as stored, padded
// to max(n_head, head_dim) (the release stores [128] for 96 heads; the public golden checkpoints
// pad as well); an MXFP4 expert weight counts its logical parameters (WeightEntry::params).
int64_t& field(ParamCounts& c, const WeightEntry& w) {
  if (w.slot == WeightSlot::moe_latent_norm) return c.moe.latent_norm;
  if (w.role == "norms and attn-res") return w.layer < 0 ? c.model_glue : c.layer_glue;
  const std::pair<const char*, int64_t*> by_role[] = {
      {"embedding", &c.embed},
      {"lm head", &c.lm_head},
      {"kda attention", &c.kda_layer},
      {"mla attention", &c.mla_layer},
      {"dense ffn", &c.dense_ffn},
      {"moe router", &c.moe.router},
      {"moe latent projections", &c.moe.latent_proj},
      {"moe shared experts", &c.moe.shared},
      {"moe routed experts", &c.moe.expert},
  };
  for (const auto& [role, f] : by_role) {
    if (w.role == role) return *f;
  }
  fail("k3 cost: weight '", w.name, "' has unknown role '", w.role, "'");
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

// Sums the weight table. Per-layer fields hold one instance: the first layer of each kind (all
// layers of a kind have the same tensors) and, for routed experts, expert 0.
ParamCounts param_counts(const HParams& hp) {
  ParamCounts c;
  std::map<const int64_t*, int64_t> first_layer;
  for (const WeightEntry& w : weight_table(hp)) {
    if (w.expert > 0 || w.layer >= hp.n_layer) continue;  // the MTP head is not inference
    int64_t& f = field(c, w);
    if (first_layer.emplace(&f, w.layer).first->second == w.layer) f += w.params;
  }
  if (hp.moe.n_expert > 0) {
    c.moe.n_expert = hp.moe.n_expert;
    c.moe.n_used = hp.moe.n_used;
  }
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
