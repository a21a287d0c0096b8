// Shared pieces of `k3 cost` (cmd_cost.cpp): the parsed inputs, the number formatting and table
// printing helpers (cost_format.cpp), and one function per report section. Each section returns
// its JSON object and, when `print` is set, prints its tables; docs/cost.md explains every number.
//   cost_tables_model.cpp      params (parameters, LatentMoE budget), situ
//   cost_tables_attention.cpp  memory (cache/state bytes, crossover), macs
//   cost_tables_moe.cpp        moe (serving regimes on a hardware preset), qb (balancing sim)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cost/hardware.h"
#include "cost/qb_sim.h"
#include "k3/hparams.h"

namespace k3::cli::cost_report {

using json = nlohmann::json;

struct Inputs {
  HParams hp;
  std::string config_path;
  cost::Hardware hw;
  int64_t context = 0, batch = 1;
  cost::QbSimOptions qb;
  std::set<std::string> sections;
  bool want(const std::string& s) const { return sections.count(s) > 0; }
};

// ---- formatting (cost_format.cpp) ------------------------------------------------------------

std::string num(double v);                      // exact integers grouped "1,234"; else 4 digits
std::string fixed(double v, int decimals);      // printf "%.*f"
std::string human(double v, const char* unit);  // decimal prefixes: "1.500 GB"
std::string bytes(double v);                    // "1,500,000 B (1.500 MB)"
std::string count(double v);                    // parameter counts: "105.4B", "2.78T"
std::string seconds(double v);                  // "12.5 ms", "340 ns"

struct Table {
  std::string title;
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};

// Prints the title, the header, a rule and the rows; first column left-aligned, others right.
void print_table(const Table& t);
void note(const std::string& text);  // one indented line under a table

// ---- report sections -------------------------------------------------------------------------

json params_section(const HParams& hp, bool print);  // keys "params" and "latent_moe"
json situ_section(const HParams& hp, bool print);
json memory_section(const Inputs& in, bool print);
json macs_section(const HParams& hp, bool print);
json moe_section(const Inputs& in, bool print);
// Also returns the simulation in *out, for the qb_maxvio.svg figure.
json qb_section(const Inputs& in, cost::QbSimResult* out, bool print);

}  // namespace k3::cli::cost_report
