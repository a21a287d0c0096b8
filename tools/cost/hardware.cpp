#include "cost/hardware.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "k3/error.h"
#include "k3/json_depth.h"

namespace k3::cost {
namespace {

using nlohmann::json;

// Vendor datasheet figures (dense, no sparsity), rounded. Network: one 400 Gb/s NIC per device,
// the usual inter-node fabric of a large EP domain. Edit or pass --hw FILE for other setups.
constexpr const char* kPresets = R"json([
  {"name": "h200", "description": "NVIDIA H200 SXM, 400 Gb/s NIC per GPU, EP 64",
   "flop_per_s": 989e12, "hbm_bytes_per_s": 4.8e12, "hbm_bytes": 141e9,
   "net_bytes_per_s": 50e9, "ep_size": 64, "act_bytes": 2},
  {"name": "h100", "description": "NVIDIA H100 SXM, 400 Gb/s NIC per GPU, EP 64",
   "flop_per_s": 989e12, "hbm_bytes_per_s": 3.35e12, "hbm_bytes": 80e9,
   "net_bytes_per_s": 50e9, "ep_size": 64, "act_bytes": 2},
  {"name": "mi300x", "description": "AMD Instinct MI300X, 400 Gb/s NIC per GPU, EP 64",
   "flop_per_s": 1307e12, "hbm_bytes_per_s": 5.3e12, "hbm_bytes": 192e9,
   "net_bytes_per_s": 50e9, "ep_size": 64, "act_bytes": 2},
  {"name": "cpu-laptop", "description": "8-core laptop CPU, LPDDR5X, 10 GbE, no expert parallelism",
   "flop_per_s": 1e12, "hbm_bytes_per_s": 1.2e11, "hbm_bytes": 64e9,
   "net_bytes_per_s": 1.25e9, "ep_size": 1, "act_bytes": 2}
])json";

const json& presets() {
  static const json table = json::parse(kPresets);
  return table;
}

double positive_number(const json& j, const char* key, const std::string& where, double dflt,
                       bool required) {
  if (!j.contains(key)) {
    check(!required, where, ": missing field '", key, "'");
    return dflt;
  }
  const json& v = j[key];
  K3_CHECK(v.is_number() && v.get<double>() > 0, where, ".", key,
           ": expected a positive number, found ", v.dump());
  return v.get<double>();
}

std::string optional_string(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return "";
  K3_CHECK(j[key].is_string(), where, ".", key, ": expected a string, found ", j[key].dump());
  return j[key].get<std::string>();
}

}  // namespace

std::vector<std::string> hardware_preset_names() {
  std::vector<std::string> names;
  for (const json& p : presets()) names.push_back(p["name"].get<std::string>());
  return names;
}

Hardware hardware_preset(const std::string& name) {
  std::string known;
  for (const json& p : presets()) {
    if (p["name"] == name) return hardware_from_json(p, "hardware preset " + name);
    known += (known.empty() ? "" : ", ") + p["name"].get<std::string>();
  }
  fail("unknown hardware preset '", name, "' (known: ", known, "; or pass a JSON file)");
}

Hardware hardware_from_json(const json& j, const std::string& source) {
  check(j.is_object(), source, ": expected a JSON object with the hardware fields");
  static const std::set<std::string> kKnown = {
      "name",      "description",     "flop_per_s", "hbm_bytes_per_s",
      "hbm_bytes", "net_bytes_per_s", "ep_size",    "act_bytes"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    check(kKnown.count(it.key()) > 0, source, ": unknown field '", it.key(),
          "' (known: name, description, flop_per_s, hbm_bytes_per_s, hbm_bytes, "
          "net_bytes_per_s, ep_size, act_bytes)");
  }
  Hardware hw;
  hw.name = optional_string(j, "name", source);
  hw.description = optional_string(j, "description", source);
  hw.flop_per_s = positive_number(j, "flop_per_s", source, 0, true);
  hw.hbm_bytes_per_s = positive_number(j, "hbm_bytes_per_s", source, 0, true);
  hw.hbm_bytes = positive_number(j, "hbm_bytes", source, 0, false);
  hw.net_bytes_per_s = positive_number(j, "net_bytes_per_s", source, 0, true);
  hw.act_bytes = positive_number(j, "act_bytes", source, 2, false);
  check(j.contains("ep_size"), source, ": missing field 'ep_size'");
  const json& ep = j["ep_size"];
  K3_CHECK(ep.is_number_integer() && ep.get<int64_t>() >= 1, source,
           ".ep_size: expected a positive integer, found ", ep.dump());
  hw.ep_size = ep.get<int64_t>();
  if (hw.name.empty()) hw.name = source;
  return hw;
}

Hardware hardware_from_file(const std::string& path) {
  std::ifstream f(path);
  check(f.good(), "cannot open hardware file ", path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  check_json_depth(text, path);
  json j = json::parse(text, nullptr, false);
  check(!j.is_discarded(), path, ": not valid JSON");
  return hardware_from_json(j, path);
}

Hardware hardware_resolve(const std::string& file_or_preset) {
  const std::string& s = file_or_preset;
  bool looks_like_file = s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0;
  if (looks_like_file || std::filesystem::is_regular_file(s)) return hardware_from_file(s);
  return hardware_preset(s);
}

}  // namespace k3::cost
