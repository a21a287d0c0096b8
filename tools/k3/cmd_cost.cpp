// k3 cost: the seed articles' cost model as a tool (issue #4). Reads a K3-style config, computes
// parameter budgets, cache/state memory, attention MAC coefficients, MoE serving regimes on a
// hardware preset, SiTU values and a QB balancing simulation (all in src/cost/), and prints them
// as tables or JSON, optionally writing SVG figures. docs/cost.md explains every number.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "cost/figures.h"
#include "cost/hardware.h"
#include "cost/macs.h"
#include "cost/memory.h"
#include "cost/moe_regimes.h"
#include "cost/params.h"
#include "cost/qb_sim.h"
#include "cost/qb_toy.h"
#include "cost/situ.h"
#include "model/hparams.h"

namespace k3::cli {
namespace {

using nlohmann::json;
namespace cost = k3::cost;

const char* kSections = "params,memory,macs,moe,situ,qb";

struct Inputs {
  HParams hp;
  std::string config_path;
  cost::Hardware hw;
  int64_t context = 0, batch = 1;
  cost::QbSimOptions qb;
  std::set<std::string> sections;
  bool want(const std::string& s) const { return sections.count(s) > 0; }
};

// ---- formatting ------------------------------------------------------------------------------

std::string grouped(long long v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// Exact integers with thousands separators; anything else with 4 significant digits.
std::string num(double v) {
  if (std::abs(v) < 9e15 && v == std::floor(v)) return grouped(static_cast<long long>(v));
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Decimal units (kB = 1e3 B), as vendors quote memory sizes and bandwidths.
std::string human(double v, const char* unit) {
  const char* prefix[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.4g %s%s" : "%.3f %s%s", v, prefix[i], unit);
  return buf;
}

std::string bytes(double v) { return num(v) + " B (" + human(v, "B") + ")"; }

// Parameter counts: 105.4B, 2.78T, 51.4M.
std::string count(double v) {
  const char* suffix[] = {"", "k", "M", "B", "T"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f%s" : "%.4g%s", v, suffix[i]);
  return buf;
}

std::string seconds(double v) {
  const char* unit[] = {"s", "ms", "us", "ns", "ps"};
  int i = 0;
  while (v != 0 && std::abs(v) < 1 && i < 4) {
    v *= 1000;
    ++i;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.4g %s", v, unit[i]);
  return buf;
}

struct Table {
  std::string title;
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};

void print_table(const Table& t) {
  std::vector<size_t> w(t.head.size(), 0);
  for (size_t c = 0; c < t.head.size(); ++c) w[c] = t.head[c].size();
  for (const auto& r : t.rows) {
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
  }
  std::printf("\n%s\n", t.title.c_str());
  auto line = [&](const std::vector<std::string>& r) {
    std::string s = " ";
    for (size_t c = 0; c < w.size(); ++c) {
      std::string cell = c < r.size() ? r[c] : "";
      std::string pad(w[c] - cell.size(), ' ');
      s += " " + (c == 0 ? cell + pad : pad + cell) + " ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::printf("%s\n", s.c_str());
  };
  line(t.head);
  size_t total = 1;
  for (size_t x : w) total += x + 2;
  std::printf("  %s\n", std::string(total - 2, '-').c_str());
  for (const auto& r : t.rows) line(r);
}

void note(const std::string& text) { std::printf("  %s\n", text.c_str()); }

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

json params_section(const HParams& hp, bool print) {
  cost::ParamCounts c = cost::param_counts(hp);
  cost::LatentBudget b = cost::latent_budget(hp);
  if (print) {
    print_params(c);
    if (hp.moe.n_expert > 0) print_latent(hp, b);
  }
  return {{"params", params_json(c)}, {"latent_moe", latent_json(hp, b)}};
}

// ---- 2. memory ---------------------------------------------------------------------------------

json crossover_json(const HParams& hp) {
  json cross = json::array();
  for (double b : {2.0, 4.0}) {
    for (bool conv : {false, true}) {
      double t = cost::kda_mla_crossover(hp, b, conv);
      cross.push_back({{"state_bytes", b},
                       {"with_conv", conv},
                       {"tokens", t},
                       {"tokens_rounded", std::llround(t)}});
    }
  }
  return cross;
}

void print_states(const cost::StateSizes& s) {
  Table t{"Cache and state memory", {"item", "scalars", "fp32", "bf16"}, {}};
  auto row = [&](const std::string& name, int64_t scalars) {
    t.rows.push_back(
        {name, num(double(scalars)), num(double(scalars * 4)), num(double(scalars * 2))});
  };
  row("MLA latent cache, per token per layer", s.mla_scalars_per_token);
  row(cat("MLA cache per token, ", s.mla_layers, " layers"),
      s.mla_scalars_per_token * s.mla_layers);
  row("KDA state S, per layer", s.kda_state_scalars);
  row("KDA conv history, per layer", s.kda_conv_scalars);
  row(cat("KDA S + conv per sequence, ", s.kda_layers, " layers"),
      (s.kda_state_scalars + s.kda_conv_scalars) * s.kda_layers);
  print_table(t);
}

void print_crossover(const json& cross) {
  Table c{"KDA-vs-MLA crossover T* = state x b / (MLA scalars/token x 2 B), nearest token (exact)",
          {"KDA state bytes b", "S only", "S + conv"},
          {}};
  auto cell = [](const json& x) {
    return cat(x["tokens_rounded"].get<long long>(), " (", fixed(x["tokens"].get<double>(), 2),
               ")");
  };
  for (size_t i = 0; i + 1 < cross.size(); i += 2) {
    c.rows.push_back(
        {num(cross[i]["state_bytes"].get<double>()), cell(cross[i]), cell(cross[i + 1])});
  }
  print_table(c);
}

void print_memory_at(const json& j, const cost::Hardware& hw) {
  const json &at = j["at"], &w = j["weights"];
  auto b = [](const json& v) { return bytes(v.get<double>()); };
  Table m{cat("Memory at context ", num(at["context"].get<double>()), ", batch ",
              at["batch"].get<int64_t>(),
              " (weights as stored; MLA cache bf16; KDA state + conv fp32)"),
          {"item", "bytes"},
          {}};
  m.rows.push_back({"weights (routed experts)", b(w["experts"])});
  m.rows.push_back({"weights (everything else)", b(w["other"])});
  m.rows.push_back({cat("weights per device, experts over EP ", hw.ep_size), b(w["per_device"])});
  m.rows.push_back({"MLA caches", b(at["mla_cache"])});
  m.rows.push_back({"KDA states + conv", b(at["kda_state"])});
  m.rows.push_back({"total", b(at["total"])});
  m.rows.push_back({"cache if every layer were MLA", b(at["all_mla_cache"])});
  if (at["devices_needed"].get<double>() > 0) {
    m.rows.push_back(
        {cat("devices of ", hw.name, " (memory only)"), num(at["devices_needed"].get<double>())});
  }
  print_table(m);
}

json memory_section(const Inputs& in, bool print) {
  const HParams& hp = in.hp;
  cost::StateSizes s = cost::state_sizes(hp);
  cost::MemoryAt at = cost::memory_at(hp, in.context, in.batch);
  cost::WeightBytes w = cost::weight_bytes(hp);
  double devices = in.hw.hbm_bytes > 0 ? std::ceil(at.total() / in.hw.hbm_bytes) : 0;
  json j = {{"mla_scalars_per_token_layer", s.mla_scalars_per_token},
            {"mla_layers", s.mla_layers},
            {"mla_bytes_per_token_fp32", s.mla_bytes_per_token(4)},
            {"mla_bytes_per_token_bf16", s.mla_bytes_per_token(2)},
            {"kda_layers", s.kda_layers},
            {"kda_state_scalars_per_layer", s.kda_state_scalars},
            {"kda_conv_scalars_per_layer", s.kda_conv_scalars},
            {"kda_state_bytes_per_layer_fp32", s.kda_state_bytes(4)},
            {"kda_state_bytes_per_layer_bf16", s.kda_state_bytes(2)},
            {"kda_total_bytes_fp32", s.kda_total_bytes(4)},
            {"kda_total_bytes_bf16", s.kda_total_bytes(2)},
            {"crossover", crossover_json(hp)},
            {"weights",
             {{"experts", w.experts},
              {"other", w.other},
              {"total", w.total()},
              {"per_device", w.per_device(in.hw.ep_size)},
              {"ep_size", in.hw.ep_size}}},
            {"at",
             {{"context", at.context},
              {"batch", at.batch},
              {"weights", at.weights},
              {"mla_cache", at.mla_cache},
              {"kda_state", at.kda_state},
              {"total", at.total()},
              {"all_mla_cache", at.all_mla_cache},
              {"devices_needed", devices}}}};
  if (print) {
    print_states(s);
    if (s.kda_layers > 0 && s.mla_layers > 0) print_crossover(j["crossover"]);
    print_memory_at(j, in.hw);
  }
  return j;
}

// ---- 3. MACs -----------------------------------------------------------------------------------

json macs_section(const HParams& hp, bool print) {
  cost::MacCoefficients m = cost::mac_coefficients(hp);
  const MlaHParams& a = hp.mla;
  json vars = json::array();
  for (const cost::AttnVariant& v : m.variants) {
    vars.push_back({{"name", v.name},
                    {"cached_scalars", v.cached},
                    {"cached_bytes_bf16", 2 * v.cached},
                    {"decode_mac", v.mac},
                    {"mac_per_cached_byte", v.mac_per_cached_byte(2)}});
  }
  json j = {{"q_heads", m.q_heads},
            {"mla_prefill", m.mla_prefill},
            {"mla_decode", m.mla_decode},
            {"mha_baseline", m.mha_baseline},
            {"decode_vs_mha", m.decode_vs_mha()},
            {"prefill_vs_mha", m.prefill_vs_mha()},
            {"variants", vars}};
  if (!print) return j;
  Table t{"Attention-core MACs per (query, cached position), one layer, all heads",
          {"form", "formula", "MACs", "vs MHA"},
          {}};
  t.rows.push_back({cat("MHA ", a.qk_nope, "/", a.v_head, " baseline"),
                    cat(a.n_head, "x(", a.qk_nope, "+", a.v_head, ")"), num(double(m.mha_baseline)),
                    "1x"});
  t.rows.push_back({"MLA prefill (expanded)", cat(a.n_head, "x(", a.qk_head(), "+", a.v_head, ")"),
                    num(double(m.mla_prefill)), fixed(m.prefill_vs_mha(), 4) + "x"});
  t.rows.push_back({"MLA decode (absorbed)",
                    cat(a.n_head, "x(", a.cache_width(), "+", a.kv_lora_rank, ")"),
                    num(double(m.mla_decode)), fixed(m.decode_vs_mha(), 4) + "x"});
  print_table(t);
  Table v{"Cached scalars per position per layer, and decode MACs",
          {"cache", "scalars", "bytes (bf16)", "decode MACs", "MAC per cached byte"},
          {}};
  for (const cost::AttnVariant& x : m.variants) {
    v.rows.push_back({x.name, num(double(x.cached)), num(double(2 * x.cached)), num(double(x.mac)),
                      fixed(x.mac_per_cached_byte(2), 2)});
  }
  print_table(v);
  return j;
}

// ---- 4. MoE regimes ----------------------------------------------------------------------------

json moe_section(const Inputs& in, bool print) {
  std::vector<cost::MoeRegime> rs = cost::moe_regimes(in.hp, in.hw);
  const cost::Hardware& hw = in.hw;
  json hwj = {{"name", hw.name},
              {"description", hw.description},
              {"flop_per_s", hw.flop_per_s},
              {"hbm_bytes_per_s", hw.hbm_bytes_per_s},
              {"hbm_bytes", hw.hbm_bytes},
              {"net_bytes_per_s", hw.net_bytes_per_s},
              {"ep_size", hw.ep_size},
              {"act_bytes", hw.act_bytes}};
  json arr = json::array();
  for (const cost::MoeRegime& r : rs) {
    arr.push_back({{"name", r.name},
                   {"width", r.width},
                   {"n_expert", r.n_expert},
                   {"n_used", r.n_used},
                   {"total_params", r.total_params},
                   {"active_params", r.active_params},
                   {"flops_per_token", r.flops},
                   {"hbm_bytes_per_token", r.hbm_bytes},
                   {"net_bytes_per_token", r.net_bytes},
                   {"intensity_one_token", r.intensity_one},
                   {"tokens_per_expert_compute_bound", r.tokens_per_expert},
                   {"tokens_in_domain_compute_bound", r.tokens_in_domain},
                   {"tokens_per_device_compute_bound", r.tokens_per_device},
                   {"hbm_seconds_per_token", r.hbm_seconds},
                   {"compute_seconds_per_token", r.compute_seconds},
                   {"comm_seconds_per_token", r.comm_seconds},
                   {"comm_compute_ratio", r.comm_compute_ratio}});
  }
  json j = {{"hardware", hwj}, {"regimes", arr}};
  if (!print || rs.empty()) return j;
  std::printf("\nHardware %s: %s\n", hw.name.c_str(), hw.description.c_str());
  note(cat(human(hw.flop_per_s, "FLOP/s"), ", HBM ", human(hw.hbm_bytes_per_s, "B/s"), ", network ",
           human(hw.net_bytes_per_s, "B/s"), " per device, EP ", hw.ep_size, ", ", hw.act_bytes,
           " B per routed activation, expert weights ", cost::expert_bytes_per_param(in.hp), " B"));
  Table t{
      "MoE regimes per token per MoE layer, routed experts only (full = standard MoE, "
      "eff/acc = LatentMoE)",
      {"quantity"},
      {}};
  for (const auto& r : rs) t.head.push_back(r.name);
  auto row = [&](const char* name, auto get) {
    std::vector<std::string> cells = {name};
    for (const auto& r : rs) cells.push_back(get(r));
    t.rows.push_back(cells);
  };
  using R = cost::MoeRegime;
  row("active of experts", [](const R& r) { return num(r.n_used) + " of " + num(r.n_expert); });
  row("expert width", [](const R& r) { return num(r.width); });
  row("total routed params", [](const R& r) { return num(r.total_params); });
  row("active routed params", [](const R& r) { return num(r.active_params); });
  row("FLOPs", [](const R& r) { return human(r.flops, "FLOP"); });
  row("HBM bytes (batch 1)", [](const R& r) { return human(r.hbm_bytes, "B"); });
  row("network bytes (dispatch+combine)", [](const R& r) { return human(r.net_bytes, "B"); });
  row("FLOP/B at 1 token per expert", [](const R& r) { return fixed(r.intensity_one, 2); });
  row("tokens/expert to be compute-bound",
      [](const R& r) { return fixed(r.tokens_per_expert, 1); });
  row("tokens in EP domain (t* = t_exp N/K)",
      [](const R& r) { return fixed(r.tokens_in_domain, 0); });
  row("  per device", [](const R& r) { return fixed(r.tokens_per_device, 1); });
  row("HBM time, batch 1, one device", [](const R& r) { return seconds(r.hbm_seconds); });
  row("compute time / token (EP domain)", [](const R& r) { return seconds(r.compute_seconds); });
  row("comm time / token (EP domain)", [](const R& r) { return seconds(r.comm_seconds); });
  row("comm/compute = F a / (3 m B_net)",
      [](const R& r) { return fixed(r.comm_compute_ratio, 3); });
  print_table(t);
  return j;
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

// ---- 6. QB -------------------------------------------------------------------------------------

json qb_toy_json(const cost::QbToyResult& t) {
  auto run = [](const cost::QbToyRun& r) {
    return json{{"dual", r.dual}, {"bias", r.bias}, {"fixed_point", r.fixed_point}};
  };
  return {{"scores", t.scores.s},
          {"optimum", t.optimum},
          {"best_assignment", t.best},
          {"kth", run(t.kth)},
          {"paddle", run(t.paddle)}};
}

json qb_section(const Inputs& in, cost::QbSimResult* out, bool print) {
  const cost::QbSimOptions& o = in.qb;
  *out = cost::qb_simulate(o);
  cost::QbToyResult toy = cost::qb_toy();
  json j = {{"options",
             {{"experts", o.experts},
              {"top_k", o.top_k},
              {"tokens", o.tokens},
              {"steps", o.steps},
              {"bins", o.bins},
              {"seed", o.seed},
              {"skew", o.skew},
              {"lf_rate", o.lf_rate},
              {"convention", "paddle"}}},
            {"maxvio_exact", out->exact},
            {"maxvio_histogram", out->histogram},
            {"maxvio_loss_free", out->loss_free},
            {"max_gap_exact_histogram", out->max_gap},
            {"max_gap_step", out->max_gap_step},
            {"toy_3x3", qb_toy_json(toy)}};
  if (!print) return j;
  Table t{cat("QB simulation: MaxVio per step (N = ", o.experts, ", k = ", o.top_k, ", T = ",
              o.tokens, " tokens/batch, seed ", o.seed, ", popularity skew ", o.skew, ")"),
          {"step", "QB exact", cat("QB ", o.bins, " bins"), cat("Loss-Free u=", o.lf_rate)},
          {}};
  for (size_t i = 0; i < out->exact.size(); ++i) {
    t.rows.push_back({std::to_string(i), fixed(out->exact[i], 5), fixed(out->histogram[i], 5),
                      fixed(out->loss_free[i], 5)});
  }
  print_table(t);
  note(cat("max |exact - histogram| over ", out->exact.size(),
           " observations: ", fixed(out->max_gap, 5), " (step ", out->max_gap_step, ")"));
  std::printf("\nQB 3x3 enumerable example (k = 1, one token per expert): scores\n");
  for (int64_t r = 0; r < 3; ++r) {
    note(cat("token ", r, ": [", toy.scores.at(r, 0), " ", toy.scores.at(r, 1), " ",
             toy.scores.at(r, 2), "]"));
  }
  auto duals = [](const cost::QbToyRun& r) {
    std::string s;
    for (double d : r.dual) s += (s.empty() ? "" : " -> ") + fixed(d, 4);
    return s + (r.fixed_point ? " (fixed point)" : " (no fixed point)");
  };
  note(cat("best one-to-one assignment: ", toy.optimum));
  note("k-th threshold, q-th smallest (>=): dual " + duals(toy.kth));
  note("(k+1)-th threshold, (q+1)-th smallest (>): dual " + duals(toy.paddle));
  return j;
}

// ---- command -----------------------------------------------------------------------------------

std::string cost_summary() {
  std::string presets;
  for (const std::string& n : cost::hardware_preset_names()) {
    presets += (presets.empty() ? "" : ", ") + n;
  }
  return "The cost model of the seed articles for any K3-style config (docs/cost.md explains "
         "every\n"
         "number and its source). Sections (--sections):\n"
         "  params  parameters by component, active per token, the LatentMoE budget (full width:\n"
         "          N/alpha experts of width d; latent: N experts of width l), sparsity\n"
         "  memory  MLA latent cache and KDA state bytes, the KDA-vs-MLA crossover length with "
         "and\n"
         "          without conv states, memory at --context and --batch, weights per device\n"
         "  macs    attention-core MACs (prefill, decode, vs a 128/128 MHA), cached scalars per\n"
         "          position for MHA, GQA8, MQA, MLA and shared K=V\n"
         "  moe     full / eff / acc MoE regimes on --hw: bytes and FLOPs per token, arithmetic\n"
         "          intensity, tokens per expert to be compute-bound, comm/compute = F a/(3 m "
         "B_net)\n"
         "  situ    SiTU-GLU vs SwiGLU vs GLU values, the gate branch range\n"
         "  qb      seeded QB simulation: exact-quantile QB vs B-bin histogram QB vs Loss-Free,\n"
         "          MaxVio per step; the 3x3 example where alternating QB updates stall (dual 5\n"
         "          vs optimum 4). Skipped for a config without experts unless --qb-experts is "
         "set.\n"
         "Hardware (--hw): a preset (" +
         presets +
         ") or a JSON file\n"
         "  {\"name\": \"lab\", \"flop_per_s\": 989e12, \"hbm_bytes_per_s\": 4.8e12, "
         "\"hbm_bytes\": 141e9,\n"
         "   \"net_bytes_per_s\": 50e9, \"ep_size\": 64, \"act_bytes\": 2}\n"
         "  (name, description, hbm_bytes and act_bytes are optional; act_bytes defaults to 2).\n"
         "--plots DIR writes capacity.svg, param_budget.svg, macs.svg, cache_scalars.svg,\n"
         "situ_gates.svg, situ_diag.svg and qb_maxvio.svg.";
}

Args make_args() {
  return Args(
      "cost", "[-m DIR | --config CONFIG.json] [--hw FILE|PRESET] [--json] [--plots DIR] [options]",
      cost_summary(),
      {{"model", "m", "DIR", "checkpoint directory (reads DIR/config.json)", ""},
       {"config", "", "FILE", "config.json in the official layout (e.g. configs/kimi-k3.json)", ""},
       {"hw", "", "FILE|PRESET", "hardware: a preset name or a JSON file", "h200"},
       {"json", "", "", "print one JSON object instead of tables", ""},
       {"plots", "", "DIR", "write SVG figures into DIR (created if missing)", ""},
       {"sections", "", "LIST", "comma list of sections to compute", kSections},
       {"context", "", "N", "context length for the memory total (tokens)", "131072"},
       {"batch", "", "N", "sequences for the memory total", "1"},
       {"qb-tokens", "", "N", "QB simulation: tokens per batch", "4096"},
       {"qb-steps", "", "N", "QB simulation: observations (steps)", "41"},
       {"qb-bins", "", "N", "QB simulation: histogram bins", "1000"},
       {"qb-seed", "", "N", "QB simulation: random seed", "20260909"},
       {"qb-skew", "", "X", "QB simulation: std of the expert popularity logits", "0.5"},
       {"qb-experts", "", "N", "QB simulation: experts (default: num_experts of the config)", ""},
       {"qb-top-k", "", "N", "QB simulation: top-k (default: num_experts_per_token)", ""},
       {"lf-rate", "", "U", "Loss-Free bias step u", "0.001"}});
}

HParams load_hparams(const Args& args, std::string* path) {
  bool m = args.has("model"), c = args.has("config");
  check(m || c,
        "give a model: -m DIR (a checkpoint directory) or --config FILE (e.g. "
        "--config configs/kimi-k3.json)");
  check(!(m && c), "give either -m DIR or --config FILE, not both");
  if (m) {
    std::string dir = args.str("model");
    check(std::filesystem::is_directory(dir), "-m ", dir, ": not a directory");
    *path = (std::filesystem::path(dir) / "config.json").string();
  } else {
    *path = args.str("config");
  }
  return hparams_from_file(*path);
}

std::set<std::string> parse_sections(const std::string& text) {
  const std::set<std::string> known = {"params", "memory", "macs", "moe", "situ", "qb"};
  std::set<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    check(known.count(item) > 0, "--sections: unknown section '", item, "' (known: ", kSections,
          ")");
    out.insert(item);
  }
  check(!out.empty(), "--sections: empty list");
  return out;
}

int64_t positive(const Args& args, const char* name) {
  int64_t v = args.integer(name);
  check(v > 0, "option --", name, ": expected a positive integer, found ", v);
  return v;
}

Inputs read_inputs(const Args& args) {
  Inputs in;
  in.hp = load_hparams(args, &in.config_path);
  in.hw = cost::hardware_resolve(args.str("hw"));
  in.sections = parse_sections(args.str("sections"));
  in.context = args.integer("context");
  check(in.context >= 0, "option --context: expected a non-negative integer");
  in.batch = positive(args, "batch");
  cost::QbSimOptions& q = in.qb;
  q.experts = args.has("qb-experts") ? positive(args, "qb-experts") : in.hp.moe.n_expert;
  q.top_k = args.has("qb-top-k") ? positive(args, "qb-top-k") : in.hp.moe.n_used;
  q.tokens = positive(args, "qb-tokens");
  q.steps = positive(args, "qb-steps");
  q.bins = positive(args, "qb-bins");
  int64_t seed = args.integer("qb-seed");
  check(seed >= 0, "option --qb-seed: expected a non-negative integer");
  q.seed = static_cast<uint64_t>(seed);
  q.skew = args.number("qb-skew");
  q.lf_rate = args.number("lf-rate");
  if (q.experts < 2 && args.str("sections") == kSections) in.sections.erase("qb");
  if (in.want("qb")) {
    check(q.experts >= 2, "QB simulation needs a MoE config (or --qb-experts N --qb-top-k K)");
  }
  return in;
}

void write_plots(const std::string& dir, const HParams& hp, const cost::QbSimResult* qb,
                 bool quiet) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  check(!ec && std::filesystem::is_directory(dir), "--plots ", dir, ": cannot create directory (",
        ec.message(), ")");
  for (const cost::Figure& f : cost::cost_figures(hp, qb)) {
    std::string path = (std::filesystem::path(dir) / f.file).string();
    std::ofstream out(path, std::ios::binary);
    out << f.svg;
    check(out.good(), "cannot write ", path);
    if (!quiet) std::printf("wrote %s\n", path.c_str());
  }
}

}  // namespace

int cmd_cost(int argc, char** argv) {
  Args args = make_args();
  if (!args.parse(argc, argv)) return 0;
  check(args.positionals().empty(), "unexpected argument '",
        args.positionals().empty() ? "" : args.positionals()[0], "' (see k3 cost --help)");
  Inputs in = read_inputs(args);
  const bool print = !args.has("json");
  const HParams& hp = in.hp;
  json j = {{"config", in.config_path}};
  if (print) {
    std::printf("k3 cost: %s\n", in.config_path.c_str());
    note(cat(hp.n_layer, " layers (", hp.n_layers_of(AttnKind::kda), " KDA, ",
             hp.n_layers_of(AttnKind::mla), " MLA), d = ", hp.d_model, ", vocab ", hp.vocab, ", ",
             hp.moe.n_expert, " experts (top-", hp.moe.n_used, ", latent ", hp.moe.d_latent, ")"));
  }
  if (in.want("params")) j.update(params_section(hp, print));
  if (in.want("memory")) j["memory"] = memory_section(in, print);
  if (in.want("macs")) j["macs"] = macs_section(hp, print);
  if (in.want("moe")) j["moe"] = moe_section(in, print);
  if (in.want("situ")) j["situ"] = situ_section(hp, print);
  cost::QbSimResult qb;
  if (in.want("qb")) j["qb"] = qb_section(in, &qb, print);
  if (args.has("plots")) write_plots(args.str("plots"), hp, in.want("qb") ? &qb : nullptr, !print);
  if (!print) std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace k3::cli
