// `k3 cost` sections about the model's weights and activations: parameters by component with the
// LatentMoE budget (section params) and SiTU-GLU values (section situ). docs/cost.md sections 1, 5.
#include <string>
#include <vector>

#include "cost/params.h"
#include "cost/situ.h"
#include "cost_report.h"
#include "k3/error.h"

namespace k3::cli::cost_report {
namespace {

// ---- 1. parameters -----------------------------------------------------------------------------

struct ParamRow {
  const char* name;
  int64_t per_layer, layers, active_per_layer;
};

std::vector<ParamRow> param_rows(const cost::ParamCounts& c) {
  const cost::MoeLayerParams& m = c.moe;
  return {
      {"embedding", c.embed, 1, c.embed},
      {"lm_head", c.lm_head, 1, c.lm_head},
      {"KDA attention", c.kda_layer, c.n_kda, c.kda_layer},
      {"MLA attention", c.mla_layer, c.n_mla, c.mla_layer},
      {"dense FFN", c.dense_ffn, c.n_dense, c.dense_ffn},
      {"MoE router + bias", m.router, c.n_moe, m.router},
      {"MoE latent down+up proj", m.latent_proj, c.n_moe, m.latent_proj},
      {"MoE latent norm", m.latent_norm, c.n_moe, m.latent_norm},
      {"MoE routed experts", m.routed_all(), c.n_moe, m.routed_active()},
      {"MoE shared experts", m.shared, c.n_moe, m.shared},
      {"norms + AttnRes (per layer)", c.layer_glue, c.n_layer, c.layer_glue},
      {"final norm + output AttnRes", c.model_glue, 1, c.model_glue},
  };
}

json params_json(const cost::ParamCounts& c) {
  json j;
  for (const ParamRow& r : param_rows(c)) {
    j["components"].push_back({{"name", r.name},
                               {"per_layer", r.per_layer},
                               {"layers", r.layers},
                               {"total", r.per_layer * r.layers},
                               {"active", r.active_per_layer * r.layers}});
  }
  j["kda_layer"] = c.kda_layer;
  j["mla_layer"] = c.mla_layer;
  j["dense_ffn"] = c.dense_ffn;
  j["moe_layer"] = c.moe.total();
  j["moe_layer_active"] = c.moe.active();
  j["embed_and_head"] = c.embed + c.lm_head;
  j["total"] = c.total();
  j["active"] = c.active();
  j["active_without_embedding"] = c.active_without_embed();
  j["active_fraction"] = double(c.active()) / double(c.total());
  return j;
}

json latent_json(const HParams& hp, const cost::LatentBudget& b) {
  return {{"alpha", b.alpha},
          {"full_width",
           {{"n_expert", b.full_n_expert},
            {"n_used", b.full_n_used},
            {"width", hp.d_model},
            {"active", b.full_active},
            {"total", b.full_total}}},
          {"latent",
           {{"n_expert", hp.moe.n_expert},
            {"n_used", hp.moe.n_used},
            {"width", hp.moe.d_latent},
            {"active", b.latent_active},
            {"total", b.latent_total}}},
          {"projections", b.projections},
          {"projection_fraction", b.projection_fraction},
          {"shared", b.shared},
          {"sparsity", b.sparsity}};
}

void print_params(const cost::ParamCounts& c) {
  Table t{
      "Parameters by component", {"component", "per layer", "layers", "total", "active/token"}, {}};
  for (const ParamRow& r : param_rows(c)) {
    if (r.per_layer * r.layers == 0) continue;  // e.g. the MoE rows of a dense model
    t.rows.push_back({r.name, num(double(r.per_layer)), num(double(r.layers)),
                      num(double(r.per_layer * r.layers)),
                      num(double(r.active_per_layer * r.layers))});
  }
  t.rows.push_back({"total", "", "", num(double(c.total())), num(double(c.active()))});
  print_table(t);
  note(cat("total ", count(double(c.total())), "; active per token ", count(double(c.active())),
           " with the embedding table, ", count(double(c.active_without_embed())), " without (",
           fixed(100.0 * double(c.active()) / double(c.total()), 2), "% of all parameters)"));
  note(cat("one MoE layer: ", num(double(c.moe.total())), " parameters, ",
           num(double(c.moe.active())), " active"));
}

void print_latent(const HParams& hp, const cost::LatentBudget& b) {
  Table l{cat("LatentMoE budget per MoE layer (alpha = d/l = ", num(b.alpha),
              "; three expert matrices, router and norm excluded)"),
          {"design", "active of experts", "width", "active routed", "total routed"},
          {}};
  l.rows.push_back({"full width", num(b.full_n_used) + " of " + num(b.full_n_expert),
                    num(double(hp.d_model)), num(b.full_active), num(b.full_total)});
  l.rows.push_back({"latent (config)",
                    num(double(hp.moe.n_used)) + " of " + num(double(hp.moe.n_expert)),
                    num(double(hp.moe.d_latent)), num(b.latent_active), num(b.latent_total)});
  l.rows.push_back({"+ latent down+up proj", "", "", num(b.projections),
                    fixed(100 * b.projection_fraction, 2) + "% extra"});
  l.rows.push_back({"shared experts (both)", "", num(double(hp.d_model)), num(b.shared), ""});
  print_table(l);
  note(cat("sparsity N/k = ", num(b.sparsity),
           "; active routed matrices equal: ", b.full_active == b.latent_active ? "yes" : "no"));
}

}  // namespace

json params_section(const HParams& hp, bool print) {
  cost::ParamCounts c = cost::param_counts(hp);
  cost::LatentBudget b = cost::latent_budget(hp);
  if (print) {
    print_params(c);
    if (hp.moe.n_expert > 0) print_latent(hp, b);
  }
  return {{"params", params_json(c)}, {"latent_moe", latent_json(hp, b)}};
}

// ---- 5. SiTU -----------------------------------------------------------------------------------

json situ_section(const HParams& hp, bool print) {
  cost::SituBetas beta{hp.situ_beta, hp.situ_linear_beta};
  cost::GateMinimum g = cost::situ_gate_minimum(beta.gate);
  json rows = json::array();
  Table t{cat("SiTU-GLU (beta1 = ", beta.gate, ", beta2 = ", beta.up, ") vs SwiGLU vs GLU"),
          {"(a, b)", "SiTU-GLU", "SwiGLU a s(a) b", "GLU s(a) b"},
          {}};
  for (const cost::SituRow& r : cost::situ_table(beta)) {
    rows.push_back(
        {{"a", r.a}, {"b", r.b}, {"situ_glu", r.situ}, {"swiglu", r.swiglu}, {"glu", r.glu}});
    t.rows.push_back(
        {cat("(", r.a, ", ", r.b, ")"), fixed(r.situ, 6), fixed(r.swiglu, 6), fixed(r.glu, 6)});
  }
  json j = {{"beta_gate", beta.gate}, {"beta_up", beta.up},
            {"table", rows},          {"gate_min", {{"a", g.a}, {"value", g.value}}},
            {"gate_sup", beta.gate},  {"up_cap", beta.up}};
  if (!print) return j;
  print_table(t);
  note(cat("SiTU gate branch range [", fixed(g.value, 5), ", ", beta.gate,
           "): minimum at a = ", fixed(g.a, 4), "; up branch capped at +-", beta.up));
  return j;
}

}  // namespace k3::cli::cost_report
