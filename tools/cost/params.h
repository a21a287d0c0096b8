// Parameter counts of a K3-style model, summed over the weight table (k3/weight_table.h: the
// tensors of spec §9.2, the same table the loader validates against), plus the LatentMoE budget
// comparison of the seed articles [A1 "Stable LatentMoE", A2 "LatentMoE: trading width for more
// experts"].
//
// Units: parameters (logical weights; an MXFP4 expert weight counts as one parameter).
// "Per layer" counts cover the sequence mixer or FFN only; the six per-layer norm/AttnRes vectors
// are counted once in `layer_glue`.
#pragma once

#include <cstdint>

#include "k3/hparams.h"

namespace k3::cost {

struct MoeLayerParams {
  int64_t router = 0;       // gate.weight [N, d] + e_score_correction_bias [N]
  int64_t latent_proj = 0;  // routed_expert_down_proj [l, d] + routed_expert_up_proj [d, l]
  int64_t latent_norm = 0;  // routed_expert_norm [l]
  int64_t expert = 0;       // one routed expert: w1, w3 [m, l] + w2 [l, m]
  int64_t n_expert = 0;     // N
  int64_t n_used = 0;       // k
  int64_t shared = 0;       // shared FFN of width n_shared*m on the full d
  int64_t routed_all() const { return n_expert * expert; }
  int64_t routed_active() const { return n_used * expert; }
  int64_t total() const { return router + latent_proj + latent_norm + routed_all() + shared; }
  int64_t active() const { return total() - routed_all() + routed_active(); }
};

struct ParamCounts {
  int64_t embed = 0;       // embed_tokens [V, d]
  int64_t lm_head = 0;     // lm_head [V, d]
  int64_t kda_layer = 0;   // one KDA sequence mixer (A_log stored padded, see params.cpp)
  int64_t mla_layer = 0;   // one gated-MLA sequence mixer
  int64_t dense_ffn = 0;   // one dense SiTU-GLU FFN of width intermediate_size
  MoeLayerParams moe;      // one MoE FFN
  int64_t layer_glue = 0;  // per layer: 4 RMSNorm weights + 2 AttnRes projections = 6d
  int64_t model_glue = 0;  // final norm + output AttnRes norm and projection = 3d
  int64_t n_layer = 0, n_kda = 0, n_mla = 0, n_dense = 0, n_moe = 0;

  int64_t total() const;
  int64_t active() const;                // per token; the whole embedding table counted
  int64_t active_without_embed() const;  // per token; embedding table excluded
  int64_t routed_total() const { return n_moe * moe.routed_all(); }
};

ParamCounts param_counts(const HParams& hp);

// The article's comparison: a full-width MoE (N/alpha experts of width d, k/alpha active) against
// the config's LatentMoE (N of width l, k active), alpha = d/l. Counts use the three main expert
// matrices only ("3 d m" per full-width expert); router and norm excluded, as in [A2] FIG 12.
// Doubles because N/alpha need not be an integer for a variant under study.
struct LatentBudget {
  double alpha = 1;  // d / l
  double full_n_expert = 0, full_n_used = 0;
  double full_active = 0;          // (k/alpha) * 3 d m
  double full_total = 0;           // (N/alpha) * 3 d m
  double latent_active = 0;        // k * 3 l m
  double latent_total = 0;         // N * 3 l m
  double projections = 0;          // 2 d l: down + up, per MoE layer
  double projection_fraction = 0;  // projections / latent_active
  double shared = 0;               // n_shared * 3 d m, equal in both designs
  double sparsity = 0;             // N / k
};

LatentBudget latent_budget(const HParams& hp);

}  // namespace k3::cost
