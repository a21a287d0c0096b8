#include "k3/generation_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/error.h"
#include "k3/json_depth.h"

namespace k3 {
namespace {

// A number that fits T: a float within float range, an integer within T's range (a cast of an
// out-of-range value would be undefined).
template <typename T>
void read_number(const nlohmann::json& j, const char* key, const std::string& path, T& out) {
  if (!j.contains(key) || j[key].is_null()) return;
  const nlohmann::json& v = j[key];
  const double d = v.is_number() ? v.get<double>() : 0.0;
  bool fits = v.is_number() && std::isfinite(d);
  if constexpr (std::is_integral_v<T>) {
    fits = fits && d >= static_cast<double>(std::numeric_limits<T>::min()) &&
           d <= static_cast<double>(std::numeric_limits<T>::max()) && d == std::floor(d);
  } else {
    fits = fits && std::fabs(d) <= static_cast<double>(std::numeric_limits<T>::max());
  }
  K3_CHECK(fits, path, ": field '", key, "' must be a number",
           std::is_integral_v<T> ? " (an integer in range)" : " (in float range)", ", found ",
           v.dump());
  out = static_cast<T>(d);
}

}  // namespace

SamplingParams sampling_from_generation_config(const std::string& model_dir,
                                               SamplingParams defaults) {
  const std::string path = model_dir + "/generation_config.json";
  if (!std::filesystem::exists(path)) return defaults;
  std::ifstream f(path);
  check(f.good(), "cannot open ", path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  check_json_depth(text, path);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  check(!j.is_discarded() && j.is_object(), path, ": not a JSON object");
  SamplingParams p = defaults;
  read_number(j, "temperature", path, p.temperature);
  read_number(j, "top_k", path, p.top_k);
  read_number(j, "top_p", path, p.top_p);
  read_number(j, "min_p", path, p.min_p);
  read_number(j, "repetition_penalty", path, p.repeat_penalty);
  if (j.contains("do_sample")) {
    check(j["do_sample"].is_boolean(), path, ": field 'do_sample' must be true or false");
    if (!j["do_sample"].get<bool>()) p.temperature = 0;
  }
  return p;
}

}  // namespace k3
