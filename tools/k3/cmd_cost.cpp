// k3 cost: the seed articles' cost model as a tool (issue #4). Reads a K3-style config, computes
// parameter budgets, cache/state memory, attention MAC coefficients, MoE serving regimes on a
// hardware preset, SiTU values and a QB balancing simulation (all in tools/cost/), and prints them
// as tables or JSON, optionally writing SVG figures. docs/cost.md explains every number.
// Sections and formatting live in cost_tables_*.cpp and cost_format.cpp (see cost_report.h); this
// file parses the options, runs the requested sections and writes the figures.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "args.h"
#include "commands.h"
#include "cost/figures.h"
#include "cost/hardware.h"
#include "cost_report.h"
#include "k3/error.h"
#include "k3/hparams.h"

namespace k3::cli {
namespace {

using cost_report::Inputs;
using nlohmann::json;

const char* kSections = "params,memory,macs,moe,situ,qb";

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
  Inputs in = read_inputs(args);
  const bool print = !args.has("json");
  const HParams& hp = in.hp;
  json j = {{"config", in.config_path}};
  if (print) {
    std::printf("k3 cost: %s\n", in.config_path.c_str());
    cost_report::note(cat(hp.n_layer, " layers (", hp.n_layers_of(AttnKind::kda), " KDA, ",
                          hp.n_layers_of(AttnKind::mla), " MLA), d = ", hp.d_model, ", vocab ",
                          hp.vocab, ", ", hp.moe.n_expert, " experts (top-", hp.moe.n_used,
                          ", latent ", hp.moe.d_latent, ")"));
  }
  if (in.want("params")) j.update(cost_report::params_section(hp, print));
  if (in.want("memory")) j["memory"] = cost_report::memory_section(in, print);
  if (in.want("macs")) j["macs"] = cost_report::macs_section(hp, print);
  if (in.want("moe")) j["moe"] = cost_report::moe_section(in, print);
  if (in.want("situ")) j["situ"] = cost_report::situ_section(hp, print);
  cost::QbSimResult qb;
  if (in.want("qb")) j["qb"] = cost_report::qb_section(in, &qb, print);
  if (args.has("plots")) write_plots(args.str("plots"), hp, in.want("qb") ? &qb : nullptr, !print);
  if (!print) std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace k3::cli
