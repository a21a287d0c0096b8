#include "model/init.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "config/hparams_json.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/parallel.h"
#include "loader/safetensors_writer.h"
#include "loader/tensor_table.h"
#include "ops/mxfp4/mxfp4.h"

namespace k3 {
namespace fs = std::filesystem;
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_name(const std::string& s) {  // FNV-1a
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(mix64(seed)) {}
  double uniform() { return static_cast<double>((s_ = mix64(s_)) >> 11) * 0x1.0p-53; }
  // Approximately normal (Irwin-Hall of four 16-bit uniforms, unit variance): one 64-bit draw
  // per value, several times faster than Box-Muller; random init needs no exact tails.
  double normal() {
    const uint64_t r = (s_ = mix64(s_));
    const double sum =
        static_cast<double>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
    return (sum / 65535.0 - 2.0) * 1.7320508075688772;  // sqrt(12/4)
  }
  uint64_t bits() { return s_ = mix64(s_); }

 private:
  uint64_t s_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The value of element `col` of row `row` for a tensor; `rng` is seeded per row.
// Scales keep activations O(1): linear weights ~ N(0, 1/in), norms ~ 1 ± 0.1, AttnRes
// projections ~ N(0, 1/d) so mixing scores are O(1) and the softmax is far from uniform.
struct InitRule {
  enum Kind { normal, one_plus, log_uniform_a, uniform } kind = normal;
  double a = 0, b = 1;
};

InitRule rule_for(const std::string& name, const std::vector<int64_t>& shape, const HParams& hp) {
  const double in = static_cast<double>(shape.back());
  if (ends_with(name, "embed_tokens.weight")) return {InitRule::normal, 0, 1};
  if (ends_with(name, "_res_proj.weight")) return {InitRule::normal, 0, 2.0 / std::sqrt(in)};
  if (ends_with(name, "norm.weight")) return {InitRule::one_plus, 0, 0.1};
  if (ends_with(name, "A_log")) return {InitRule::log_uniform_a, 0.6, 2.7};
  if (ends_with(name, "dt_bias")) return {InitRule::normal, 0, 0.5};
  if (ends_with(name, "conv1d.weight")) return {InitRule::normal, 0, 0.5};
  if (ends_with(name, "e_score_correction_bias")) return {InitRule::normal, 0, 0.02};
  if (ends_with(name, "gate.weight")) return {InitRule::normal, 0, 2.0 / std::sqrt(in)};
  (void)hp;
  return {InitRule::normal, 0, 1.0 / std::sqrt(in)};
}

void fill_row(const InitRule& r, Rng& rng, int64_t row, int64_t n, int64_t n_used_a_log,
              float* out) {
  for (int64_t i = 0; i < n; ++i) {
    switch (r.kind) {
      case InitRule::normal:
        out[i] = static_cast<float>(r.a + r.b * rng.normal());
        break;
      case InitRule::one_plus:
        out[i] = static_cast<float>(1.0 + r.b * rng.normal());
        break;
      case InitRule::uniform:
        out[i] = static_cast<float>(r.a + (r.b - r.a) * rng.uniform());
        break;
      case InitRule::log_uniform_a:  // exp(A) in [a, b] for used heads; padding stays 0
        out[i] = row * n + i < n_used_a_log
                     ? static_cast<float>(std::log(r.a + (r.b - r.a) * rng.uniform()))
                     : 0.0f;
        break;
    }
  }
}

struct Planned {
  PlannedTensor t;
  std::string shard;
};

class Generator {
 public:
  Generator(const HParams& hp, const InitOptions& opt) : hp_(hp), opt_(opt) {}

  // Streams one tensor into w. MXFP4 scale tensors reuse the scales chosen for their packed
  // partner, which the table always lists first.
  void write(const PlannedTensor& t, SafetensorsWriter& w) {
    check(!opt_.cancelled || !opt_.cancelled(), "interrupted");
    if (ends_with(t.name, ".weight_scale")) {
      auto it = pending_scales_.find(t.name);
      check(it != pending_scales_.end(), "internal: scales for ", t.name, " not generated");
      w.append(it->second.data(), it->second.size());
      pending_scales_.erase(it);
      return;
    }
    const bool packed = ends_with(t.name, ".weight_packed");
    const int64_t rows = t.shape.size() == 1 ? 1 : t.shape[0];
    const int64_t cols = packed ? 2 * t.shape[1] : row_numel(t);
    const std::string logical = packed ? t.name.substr(0, t.name.size() - 7) : t.name;  // "…weight"
    const InitRule rule = rule_for(logical, {rows, cols}, hp_);
    const uint64_t seed = opt_.seed ^ hash_name(logical);
    std::vector<uint8_t> scales;
    if (packed) scales.resize(static_cast<size_t>(rows * cols / kMxfp4Group));
    const int64_t block = std::max<int64_t>(1, (8 << 20) / std::max<int64_t>(cols * 4, 1));
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      check(!opt_.cancelled || !opt_.cancelled(), "interrupted");
      const int64_t nr = std::min(block, rows - r0);
      std::vector<uint8_t> bytes(static_cast<size_t>(nr) * row_bytes(t, cols));
      parallel_for(nr, true, [&](int64_t i) {
        const int64_t r = r0 + i;
        Rng rng(mix64(seed + static_cast<uint64_t>(r)));
        uint8_t* dst = bytes.data() + i * row_bytes(t, cols);
        if (packed) {
          random_mxfp4_row(rng, rule.b, cols, dst, &scales[r * cols / kMxfp4Group]);
          return;
        }
        std::vector<float> v(static_cast<size_t>(cols));
        fill_row(rule, rng, r, cols, hp_.kda.n_head, v.data());
        encode_row(t, v, dst);
      });
      w.append(bytes.data(), bytes.size());
      done_ += bytes.size();
      if (opt_.progress) opt_.progress(done_, total_);
    }
    if (packed) pending_scales_[logical + "_scale"] = std::move(scales);
  }
  void set_total(uint64_t total) { total_ = total; }

 private:
  static int64_t row_numel(const PlannedTensor& t) {
    int64_t n = 1;
    for (size_t i = 1; i < t.shape.size(); ++i) n *= t.shape[i];
    return t.shape.size() == 1 ? t.shape[0] : n;
  }
  static size_t row_bytes(const PlannedTensor& t, int64_t cols) {
    return t.dtype == DType::u8 ? static_cast<size_t>(cols / 2) : cols * dtype_size(t.dtype);
  }
  static void encode_row(const PlannedTensor& t, const std::vector<float>& v, uint8_t* dst) {
    if (t.dtype == DType::bf16) {
      for (size_t i = 0; i < v.size(); ++i) {
        uint16_t b = f32_to_bf16(v[i]);
        std::memcpy(dst + 2 * i, &b, 2);
      }
    } else {
      std::memcpy(dst, v.data(), v.size() * 4);
    }
  }
  // Uniformly random E2M1 codes (RMS 2.93 in code units) with per-group E8M0 scales chosen so
  // the row's RMS is about `target_rms`, jittered by ±1 binade: one random byte per two values,
  // which keeps a full-width expert layer (tens of GB) quick to write.
  static void random_mxfp4_row(Rng& rng, double target_rms, int64_t cols, uint8_t* packed,
                               uint8_t* scales) {
    const int base = 127 + static_cast<int>(std::lround(std::log2(target_rms / 2.93)));
    for (int64_t g = 0; g < cols / kMxfp4Group; ++g) {
      scales[g] =
          static_cast<uint8_t>(std::clamp(base + static_cast<int>(rng.bits() % 3) - 1, 1, 254));
    }
    for (int64_t j = 0; j < cols / 2; j += 8) {
      const uint64_t r = rng.bits();
      for (int64_t b = 0; b < 8 && j + b < cols / 2; ++b)
        packed[j + b] = static_cast<uint8_t>(r >> (8 * b));
    }
  }

  const HParams& hp_;
  const InitOptions& opt_;
  std::map<std::string, std::vector<uint8_t>> pending_scales_;
  uint64_t done_ = 0, total_ = 0;
};

// The official dtype and shape of every tensor in the table, cut into shards.
std::vector<std::vector<PlannedTensor>> plan_shards(const HParams& hp, uint64_t shard_bytes,
                                                    uint64_t* total) {
  std::vector<std::vector<PlannedTensor>> shards(1);
  uint64_t shard_size = 0;
  *total = 0;
  for (const TensorSpec& s : expected_tensors(hp)) {
    PlannedTensor t{s.name, s.dtypes[0], s.shapes[0]};
    if (shard_size > 0 && shard_size + t.nbytes() > shard_bytes) {
      shards.emplace_back();
      shard_size = 0;
    }
    shards.back().push_back(t);
    shard_size += t.nbytes();
    *total += t.nbytes();
  }
  return shards;
}

// Free bytes on the filesystem that holds `dir` (or would: its nearest existing parent).
uint64_t free_bytes_at(const std::string& dir, std::string* where) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) p = dir;
  while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  *where = p.string();
  struct statvfs st {};
  if (::statvfs(p.c_str(), &st) != 0) return UINT64_MAX;  // unknown: do not refuse
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

void check_safe_to_write(const std::string& out_dir, uint64_t total, const InitOptions& opt) {
  if (opt.force) return;
  std::error_code ec;
  check(!fs::is_directory(out_dir, ec) || fs::is_empty(out_dir, ec), out_dir,
        " exists and is not empty (use --force to write into it anyway)");
  std::string where;
  const uint64_t free = opt.free_bytes ? opt.free_bytes : free_bytes_at(out_dir, &where);
  if (opt.free_bytes) where = out_dir;
  if (total > free) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "the checkpoint needs %.2f GB but only %.2f GB is free at ",
                  total / 1e9, free / 1e9);
    throw Error(std::string(msg) + where + " (use --force to write anyway)");
  }
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  check(f.good(), "error writing ", path.string());
}

}  // namespace

nlohmann::json official_config(const nlohmann::json& config, bool mxfp4) {
  nlohmann::json top = config.contains("text_config") ? config : nlohmann::json::object();
  if (!config.contains("text_config")) top["text_config"] = config;
  top["architectures"] = {"KimiK3ForConditionalGeneration"};
  top["model_type"] = "kimi_k3";
  if (mxfp4 && !top.contains("quantization_config")) {
    top["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "mxfp4-pack-quantized"},
        {"quantization_status", "compressed"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"format", "mxfp4-pack-quantized"},
            {"weights",
             {{"num_bits", 4},
              {"type", "float"},
              {"group_size", 32},
              {"strategy", "group"},
              {"symmetric", true},
              {"dynamic", false},
              {"observer", "minmax"},
              {"scale_dtype", "torch.uint8"}}},
            {"input_activations", nullptr},
            {"output_activations", nullptr}}}}},
        {"ignore",
         {".*self_attn.*", ".*shared_experts.*", ".*mlp\\.(gate|up|gate_up|down)_proj.*",
          ".*lm_head.*", ".*vision_tower.*", ".*mm_projector.*"}}};
  }
  return top;
}

uint64_t checkpoint_bytes(const nlohmann::json& config, const InitOptions& opt) {
  const HParams hp = hparams_from_json(official_config(config, opt.mxfp4), "config");
  uint64_t total = 0;
  plan_shards(hp, opt.shard_bytes, &total);
  return total;
}

void write_official_checkpoint(const nlohmann::json& top, const std::string& out_dir,
                               const InitOptions& opt, const TensorSource& source) {
  const HParams hp = hparams_from_json(top, "config");
  uint64_t total = 0;
  const std::vector<std::vector<PlannedTensor>> shards = plan_shards(hp, opt.shard_bytes, &total);
  check_safe_to_write(out_dir, total, opt);
  const bool created = !fs::exists(out_dir);
  fs::create_directories(out_dir);
  // Everything is written under ".tmp-<name>" and renamed once complete.
  std::vector<std::string> names;
  char name[64];
  for (size_t i = 0; i < shards.size(); ++i) {
    std::snprintf(name, sizeof name, "model-%05zu-of-%06zu.safetensors", i + 1, shards.size());
    names.push_back(name);
  }
  names.push_back("model.safetensors.index.json");
  names.push_back("config.json");
  auto tmp = [&](const std::string& n) { return fs::path(out_dir) / (".tmp-" + n); };
  try {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    for (size_t i = 0; i < shards.size(); ++i) {
      SafetensorsWriter w(tmp(names[i]).string(), shards[i]);
      for (const PlannedTensor& t : shards[i]) {
        source(t, w);
        index["weight_map"][t.name] = names[i];
      }
      w.finish();
    }
    write_text(tmp(names[shards.size()]), index.dump(2) + "\n");
    write_text(tmp(names[shards.size() + 1]), top.dump(2) + "\n");
    for (const std::string& n : names) fs::rename(tmp(n), fs::path(out_dir) / n);
  } catch (...) {
    std::error_code ec;
    for (const std::string& n : names) fs::remove(tmp(n), ec);
    if (created && fs::is_empty(out_dir, ec)) fs::remove(out_dir, ec);
    throw;
  }
}

void init_checkpoint(const nlohmann::json& config, const std::string& out_dir,
                     const InitOptions& opt) {
  const nlohmann::json top = official_config(config, opt.mxfp4);
  const HParams hp = hparams_from_json(top, "config");
  Generator gen(hp, opt);
  gen.set_total(checkpoint_bytes(config, opt));
  write_official_checkpoint(top, out_dir, opt,
                            [&](const PlannedTensor& t, SafetensorsWriter& w) { gen.write(t, w); });
}

}  // namespace k3
