// Hardware description for the cost model: one accelerator (or CPU) in an expert-parallel (EP)
// domain. Presets are data (a JSON table in hardware.cpp) parsed by the same function as a user's
// `--hw FILE`, so a preset and a file are validated identically.
//
// JSON layout (units are in the field names; all numbers positive):
//   { "name": "h200", "description": "...",
//     "flop_per_s": 989e12,        dense BF16 matrix FLOP/s of one device
//     "hbm_bytes_per_s": 4.8e12,   memory bandwidth of one device
//     "hbm_bytes": 141e9,          memory capacity of one device        (optional, 0 = unknown)
//     "net_bytes_per_s": 50e9,     all-to-all bandwidth per device (dispatch/combine)
//     "ep_size": 64,               devices in the expert-parallel domain
//     "act_bytes": 2 }             bytes per routed activation element (optional, default 2)
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace k3::cost {

struct Hardware {
  std::string name;
  std::string description;
  double flop_per_s = 0;       // FLOP/s
  double hbm_bytes_per_s = 0;  // B/s
  double hbm_bytes = 0;        // B; 0 = unknown
  double net_bytes_per_s = 0;  // B/s per device
  int64_t ep_size = 1;         // devices
  double act_bytes = 2;        // B per routed activation element
};

std::vector<std::string> hardware_preset_names();
Hardware hardware_preset(const std::string& name);  // throws k3::Error naming the known presets
// Parses and validates one hardware object; `source` names the file in error messages.
Hardware hardware_from_json(const nlohmann::json& j, const std::string& source);
Hardware hardware_from_file(const std::string& path);
// A path to an existing file (or anything ending in .json) is read as a file; otherwise a preset.
Hardware hardware_resolve(const std::string& file_or_preset);

}  // namespace k3::cost
