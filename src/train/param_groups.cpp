#include "train/param_groups.h"

#include <vector>

#include "k3/error.h"

namespace k3::train {
namespace {

using S = WeightSlot;

// Matrix-like: at least two axes longer than one ([1, H] AttnRes projections are vectors).
bool is_matrix_like(const std::vector<int64_t>& shape) {
  int axes = 0;
  for (int64_t d : shape) axes += d > 1;
  return axes >= 2;
}

bool is_adamw_slot(S s) {
  switch (s) {
    case S::embed:
    case S::lm_head:
    case S::final_norm:
    case S::out_res_norm:
    case S::out_res_proj:
    case S::attn_norm:
    case S::ffn_norm:
    case S::attn_res_norm:
    case S::attn_res_proj:
    case S::mlp_res_norm:
    case S::mlp_res_proj:
    case S::kda_q_conv:
    case S::kda_k_conv:
    case S::kda_v_conv:
    case S::kda_a_log:
    case S::kda_dt_bias:
    case S::kda_o_norm:
    case S::mla_q_a_norm:
    case S::mla_kv_a_norm:
    case S::moe_router:
    case S::moe_latent_norm:
      return true;
    default:
      return false;
  }
}

// The head split of an attention projection, or {none, 1}.
ParamGroup head_split(S s, const HParams& hp) {
  switch (s) {
    case S::kda_q:
    case S::kda_k:
    case S::kda_v:
    case S::kda_f_b:
    case S::kda_g:
      return {Update::muon, HeadAxis::rows, hp.kda.n_head, true};
    case S::kda_o:
      return {Update::muon, HeadAxis::cols, hp.kda.n_head, true};
    case S::mla_q_b:
    case S::mla_kv_b:
    case S::mla_g:
      return {Update::muon, HeadAxis::rows, hp.mla.n_head, true};
    case S::mla_o:
      return {Update::muon, HeadAxis::cols, hp.mla.n_head, true};
    default:
      return {Update::muon, HeadAxis::none, 1, true};
  }
}

}  // namespace

ParamGroup param_group(const WeightEntry& w, const HParams& hp, bool per_head_muon) {
  if (w.slot == S::moe_router_bias) return {Update::frozen, HeadAxis::none, 1, false};
  if (is_adamw_slot(w.slot) || w.shape.size() != 2) {
    return {Update::adamw, HeadAxis::none, 1, is_matrix_like(w.shape)};
  }
  ParamGroup g = head_split(w.slot, hp);
  if (!per_head_muon || g.heads <= 1) return {Update::muon, HeadAxis::none, 1, true};
  return g;
}

ParamGroup param_group(const std::string& name, const HParams& hp, bool per_head_muon) {
  // An MXFP4 expert matrix trains as one fp32 "<base>.weight"; the table has its packed half.
  const std::string packed = name.ends_with(".weight") ? name + "_packed" : "";
  for (const WeightEntry& w : weight_table(hp)) {
    if (w.name == name || w.name == packed) return param_group(w, hp, per_head_muon);
  }
  fail("no tensor '", name, "' in this config's weight table");
}

const char* update_name(Update u) {
  switch (u) {
    case Update::muon:
      return "muon";
    case Update::adamw:
      return "adamw";
    case Update::frozen:
      return "frozen";
  }
  return "?";
}

}  // namespace k3::train
