#include "k3/generation_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace k3 {
namespace {

template <typename T>
void read_number(const nlohmann::json& j, const char* key, const std::string& path, T& out) {
  if (!j.contains(key) || j[key].is_null()) return;
  check(j[key].is_number(), path, ": field '", key, "' must be a number, found ", j[key].dump());
  out = j[key].get<T>();
}

}  // namespace

SamplingParams sampling_from_generation_config(const std::string& model_dir,
                                               SamplingParams defaults) {
  const std::string path = model_dir + "/generation_config.json";
  if (!std::filesystem::exists(path)) return defaults;
  std::ifstream f(path);
  check(f.good(), "cannot open ", path);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
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
