// `k3 cost` sections about attention: cache and state memory with the KDA-vs-MLA crossover
// (section memory) and attention-core MAC coefficients (section macs). docs/cost.md sections 2, 3.
#include <cmath>
#include <string>

#include "cost/macs.h"
#include "cost/memory.h"
#include "cost_report.h"
#include "k3/error.h"

namespace k3::cli::cost_report {
namespace {

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

}  // namespace

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

}  // namespace k3::cli::cost_report
