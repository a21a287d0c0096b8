#include "loader/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "config/hparams_json.h"
#include "core/error.h"
#include "k3/json_depth.h"
#include "loader/tensor_table.h"

namespace k3 {
namespace fs = std::filesystem;

namespace {

// Reads the index's weight_map: tensor name -> shard file name.
std::map<std::string, std::string> read_index(const std::string& path) {
  std::ifstream f(path);
  check(f.good(), "cannot open ", path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  check_json_depth(text, path);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  check(!j.is_discarded() && j.is_object(), path, ": not valid JSON");
  check(j.contains("weight_map") && j["weight_map"].is_object(), path,
        ": missing the 'weight_map' object");
  std::map<std::string, std::string> map;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    check(it.value().is_string(), path, ": weight_map['", it.key(), "'] must be a file name");
    std::string file = it.value().get<std::string>();
    check(file.find('/') == std::string::npos, path, ": shard name '", file,
          "' must be a plain file name");
    map[it.key()] = file;
  }
  return map;
}

// Formats a list of problems, at most `limit` shown.
std::string list_some(const std::vector<std::string>& items, size_t limit = 12) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < limit; ++i) s += "\n    " + items[i];
  if (items.size() > limit) s += cat("\n    ... and ", items.size() - limit, " more");
  return s;
}

bool shape_accepted(const TensorSpec& spec, const std::vector<int64_t>& shape) {
  return std::find(spec.shapes.begin(), spec.shapes.end(), shape) != spec.shapes.end();
}

}  // namespace

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  check(fs::is_directory(dir), "model directory '", dir, "' does not exist");
  std::string config = (fs::path(dir) / "config.json").string();
  check(fs::exists(config), dir, ": no config.json");
  hp_ = hparams_from_file(config);
  open_shards();
  check_counts_fit();
  validate();
}

// Before the name table is built: a config whose layer and expert counts imply far more tensors
// or bytes than the shards hold cannot match, and its table could be millions of entries. A
// small shortfall is left to validate(), which names each missing or mis-shaped tensor.
void Checkpoint::check_counts_fit() const {
  const ImpliedSize need = implied_size(hp_);
  uint64_t have_bytes = 0;
  for (const auto& f : files_) have_bytes += f->data_bytes();
  const auto have_tensors = static_cast<int64_t>(by_name_.size());
  if (need.tensors > 2 * have_tensors + 1024) {
    fail(dir_, ": config.json implies ", need.tensors, " tensors (num_hidden_layers ", hp_.n_layer,
         ", num_experts ", hp_.moe.n_expert, "), but the shards hold only ", have_tensors,
         ": check num_hidden_layers and num_experts");
  }
  if (static_cast<uint64_t>(need.min_bytes) > 2 * have_bytes + (uint64_t{1} << 20)) {
    fail(dir_, ": config.json implies at least ", need.min_bytes,
         " bytes of weights, but the shards hold only ", have_bytes,
         " bytes of tensor data: check the widths, num_hidden_layers and num_experts");
  }
}

void Checkpoint::open_shards() {
  fs::path index = fs::path(dir_) / "model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shard_names;
  if (fs::exists(index)) {
    weight_map = read_index(index.string());
    std::set<std::string> unique;
    for (const auto& [name, file] : weight_map) unique.insert(file);
    shard_names.assign(unique.begin(), unique.end());
  } else {
    check(fs::exists(fs::path(dir_) / "model.safetensors"), dir_,
          ": neither model.safetensors.index.json nor model.safetensors found");
    shard_names.push_back("model.safetensors");
  }
  std::map<std::string, const SafetensorsFile*> by_file;
  for (const std::string& s : shard_names) {
    std::string path = (fs::path(dir_) / s).string();
    check(fs::exists(path), index.string(), ": lists shard '", s, "', which does not exist");
    files_.push_back(std::make_unique<SafetensorsFile>(path));
    by_file[s] = files_.back().get();
    for (const auto& [name, info] : files_.back()->tensors()) {
      auto [it, fresh] = by_name_.emplace(name, &info);
      check(fresh, "tensor '", name, "' appears in both ", it->second->file, " and ", path);
    }
  }
  for (const auto& [name, file] : weight_map) {
    check(by_file.at(file)->tensors().count(name) > 0, index.string(), ": lists '", name, "' in ",
          file, ", but that shard has no such tensor");
  }
}

void Checkpoint::validate() const {
  std::vector<std::string> missing, unexpected, bad_shape, bad_dtype;
  std::set<std::string> declared;
  for (const TensorSpec& spec : expected_tensors(hp_)) {
    declared.insert(spec.name);
    auto it = by_name_.find(spec.name);
    if (it == by_name_.end()) {
      missing.push_back(spec.name + " " + shape_str(spec.shapes[0]));
      continue;
    }
    const TensorInfo& t = *it->second;
    if (!shape_accepted(spec, t.shape)) {
      bad_shape.push_back(
          cat(spec.name, ": expected ", shape_str(spec.shapes[0]), ", found ", t.shape_str()));
    }
    if (std::find(spec.dtypes.begin(), spec.dtypes.end(), t.dtype) == spec.dtypes.end()) {
      bad_dtype.push_back(cat(spec.name, ": expected ", dtype_name(spec.dtypes[0]), ", found ",
                              dtype_name(t.dtype)));
    }
  }
  for (const auto& [name, info] : by_name_) {
    if (!declared.count(name) && !is_ignored_tensor(name)) unexpected.push_back(name);
  }
  if (missing.empty() && unexpected.empty() && bad_shape.empty() && bad_dtype.empty()) return;
  std::string msg = dir_ + ": the checkpoint does not match its config.json";
  if (!missing.empty())
    msg += cat("\n  ", missing.size(), " missing tensor(s):", list_some(missing));
  if (!unexpected.empty())
    msg += cat("\n  ", unexpected.size(), " unexpected tensor(s):", list_some(unexpected));
  if (!bad_shape.empty())
    msg += cat("\n  ", bad_shape.size(), " mis-shaped tensor(s):", list_some(bad_shape));
  if (!bad_dtype.empty())
    msg += cat("\n  ", bad_dtype.size(), " tensor(s) of the wrong dtype:", list_some(bad_dtype));
  fail(msg);
}

const TensorInfo& Checkpoint::tensor(const std::string& name) const {
  auto it = by_name_.find(name);
  check(it != by_name_.end(), dir_, ": no tensor '", name, "'");
  return *it->second;
}

size_t Checkpoint::mapped_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : by_name_) n += t->nbytes;
  return n;
}

}  // namespace k3
