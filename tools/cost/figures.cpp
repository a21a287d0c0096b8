#include "cost/figures.h"

#include <cmath>
#include <cstdio>

#include "cost/macs.h"
#include "cost/memory.h"
#include "cost/params.h"
#include "cost/situ.h"
#include "cost/svg_chart.h"
#include "k3/error.h"

namespace k3::cost {
namespace {

const char* kBlue = "#1f77b4";
const char* kOrange = "#ff7f0e";
const char* kGreen = "#2ca02c";
const char* kRed = "#d62728";
const char* kGrey = "#7f7f7f";

std::string millions(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1fM", v / 1e6);
  return buf;
}

Figure capacity_figure(const HParams& hp) {
  LineChart c{"Attention memory per sequence (MLA cache bf16, KDA state S only)",
              "context length (tokens)",
              "bytes",
              true,
              true,
              {},
              {}};
  Series all{cat("all ", hp.n_layer, " layers MLA"), {}, {}, kGrey, true};
  Series h2{"hybrid, KDA state 2 B", {}, {}, kBlue, false};
  Series h4{"hybrid, KDA state 4 B", {}, {}, kOrange, false};
  for (double e = 2; e <= 7.0001; e += 0.05) {
    double t = std::pow(10.0, e);
    for (Series* s : {&all, &h2, &h4}) s->x.push_back(t);
    all.y.push_back(all_mla_attention_bytes(hp, t));
    h2.y.push_back(hybrid_attention_bytes(hp, t, 2));
    h4.y.push_back(hybrid_attention_bytes(hp, t, 4));
  }
  c.series = {all, h2, h4};
  for (double b : {2.0, 4.0}) {
    double t = kda_mla_crossover(hp, b, false);
    c.markers.push_back({t, cat("T*=", std::llround(t), " (", b, " B)")});
  }
  return {"capacity.svg", svg_line_chart(c)};
}

Figure budget_figure(const HParams& hp) {
  LatentBudget b = latent_budget(hp);
  char full[64], latent[64];
  std::snprintf(full, sizeof full, "full width: %g of %g", b.full_n_used, b.full_n_expert);
  std::snprintf(latent, sizeof latent, "latent: %lld of %lld",
                static_cast<long long>(hp.moe.n_used), static_cast<long long>(hp.moe.n_expert));
  BarChart c{"Active main-matrix parameters per token, one MoE layer", "parameters", {}};
  c.bars.push_back({full, {{b.full_active, kBlue, "routed experts"}}, millions(b.full_active)});
  c.bars.push_back({latent,
                    {{b.latent_active, kBlue, "routed experts"},
                     {b.projections, kOrange, "latent down+up projections"}},
                    cat(millions(b.latent_active), " + ", millions(b.projections), " (",
                        std::round(b.projection_fraction * 1000) / 10, "%)")});
  c.bars.push_back(
      {"shared (both designs)", {{b.shared, kGreen, "shared experts"}}, millions(b.shared)});
  return {"param_budget.svg", svg_bar_chart(c)};
}

Figure macs_figure(const HParams& hp) {
  MacCoefficients m = mac_coefficients(hp);
  const MlaHParams& a = hp.mla;
  BarChart c{
      "Attention-core MACs per (query, cached position), one layer", "multiply-accumulates", {}};
  c.bars.push_back({cat("MHA ", a.qk_nope, "/", a.v_head),
                    {{double(m.mha_baseline), kGrey, ""}},
                    cat(m.mha_baseline)});
  c.bars.push_back({cat("MLA prefill ", a.qk_head(), "/", a.v_head),
                    {{double(m.mla_prefill), kBlue, ""}},
                    cat(m.mla_prefill)});
  c.bars.push_back({cat("MLA decode ", a.cache_width(), "/", a.kv_lora_rank),
                    {{double(m.mla_decode), kOrange, ""}},
                    cat(m.mla_decode, " (", m.decode_vs_mha(), "x MHA)")});
  return {"macs.svg", svg_bar_chart(c)};
}

Figure cache_figure(const HParams& hp) {
  MacCoefficients m = mac_coefficients(hp);
  BarChart c{"Cached scalars per position, one attention layer", "scalars", {}};
  for (const AttnVariant& v : m.variants) {
    c.bars.push_back(
        {v.name, {{double(v.cached), v.name == "MLA" ? kOrange : kBlue, ""}}, cat(v.cached)});
  }
  return {"cache_scalars.svg", svg_bar_chart(c)};
}

std::vector<Figure> situ_figures(const HParams& hp) {
  SituBetas beta{hp.situ_beta, hp.situ_linear_beta};
  SituCurves s = situ_curves(beta, -8, 8, 161, 40);
  LineChart g{"Gate branches", "a", "gate value", false, false, {}, {}};
  g.series = {{"GLU: sigmoid(a)", s.a, s.glu_gate, kGrey, true},
              {"SwiGLU: a sigmoid(a)", s.a, s.swiglu_gate, kBlue, false},
              {cat("SiTU: ", beta.gate, " tanh(a/", beta.gate, ") sigmoid(a)"), s.a, s.situ_gate,
               kOrange, false}};
  LineChart d{"GLU output at a = b", "a = b", "value", false, true, {}, {}};
  d.series = {{"SwiGLU", s.diag, s.diag_swiglu, kBlue, false},
              {"SiTU-GLU", s.diag, s.diag_situ, kOrange, false}};
  return {{"situ_gates.svg", svg_line_chart(g)}, {"situ_diag.svg", svg_line_chart(d)}};
}

Figure qb_figure(const QbSimResult& r) {
  const QbSimOptions& o = r.options;
  LineChart c{cat("MaxVio per step (N=", o.experts, ", k=", o.top_k, ", T=", o.tokens, ", seed ",
                  o.seed, ")"),
              "step",
              "MaxVio",
              false,
              true,
              {},
              {}};
  std::vector<double> steps;
  for (size_t i = 0; i < r.exact.size(); ++i) steps.push_back(static_cast<double>(i));
  c.series = {{"QB exact quantile", steps, r.exact, kBlue, false},
              {cat("QB ", o.bins, "-bin histogram"), steps, r.histogram, kOrange, true},
              {cat("Loss-Free u=", o.lf_rate), steps, r.loss_free, kRed, false}};
  return {"qb_maxvio.svg", svg_line_chart(c)};
}

}  // namespace

std::vector<Figure> cost_figures(const HParams& hp, const QbSimResult* qb) {
  std::vector<Figure> out;
  if (hp.n_layers_of(AttnKind::kda) > 0 && hp.n_layers_of(AttnKind::mla) > 0) {
    out.push_back(capacity_figure(hp));
  }
  if (hp.moe.n_expert > 0) out.push_back(budget_figure(hp));
  out.push_back(macs_figure(hp));
  out.push_back(cache_figure(hp));
  for (Figure& f : situ_figures(hp)) out.push_back(std::move(f));
  if (qb) out.push_back(qb_figure(*qb));
  return out;
}

}  // namespace k3::cost
