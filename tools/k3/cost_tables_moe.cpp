// `k3 cost` sections about routed experts: MoE serving regimes on a hardware preset (section moe)
// and the seeded QB balancing simulation with the 3x3 example (section qb). docs/cost.md 4, 6.
#include <cstdio>
#include <string>
#include <vector>

#include "cost/memory.h"
#include "cost/moe_regimes.h"
#include "cost/qb_toy.h"
#include "cost_report.h"
#include "k3/error.h"

namespace k3::cli::cost_report {

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

// ---- 6. QB -------------------------------------------------------------------------------------

namespace {

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

}  // namespace

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

}  // namespace k3::cli::cost_report
