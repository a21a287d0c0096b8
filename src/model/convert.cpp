#include "k3/convert.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "loader/checkpoint.h"
#include "model/init.h"
#include "ops/mxfp4/mxfp4.h"
#include "train/params.h"

namespace k3 {
namespace fs = std::filesystem;
namespace {

const char* kTokenizerFiles[] = {"tiktoken.model", "tokenizer_config.json",
                                 "generation_config.json", "chat_template.jinja"};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

nlohmann::json read_config(const std::string& dir) {
  const fs::path p = fs::path(dir) / "config.json";
  std::ifstream f(p);
  check(f.good(), "cannot read ", p.string());
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    fail(p.string(), " is not valid JSON: ", e.what());
  }
}

class Converter {
 public:
  explicit Converter(const ParamSet& params) : params_(params) {}

  void write(const PlannedTensor& t, SafetensorsWriter& w) {
    if (ends_with(t.name, ".weight_scale")) {  // chosen with its packed partner, listed first
      auto it = scales_.find(t.name);
      check(it != scales_.end(), "internal: scales for ", t.name, " not computed");
      w.append(it->second.data(), it->second.size());
      scales_.erase(it);
      return;
    }
    const bool packed = ends_with(t.name, ".weight_packed");
    const std::string logical = packed ? t.name.substr(0, t.name.size() - 7) : t.name;
    const auto it = params_.all().find(logical);
    check(it != params_.all().end(), "the source checkpoint has no tensor ", logical);
    const std::vector<float>& x = it->second.value;
    std::vector<uint8_t> bytes(t.nbytes());
    std::vector<float> rounded(x.size());
    if (packed) {
      const int64_t rows = t.shape[0], cols = 2 * t.shape[1];
      check(static_cast<int64_t>(x.size()) == rows * cols, logical, ": ", x.size(),
            " values where the layout needs ", rows * cols);
      std::vector<uint8_t> scales(static_cast<size_t>(rows * cols / kMxfp4Group));
      for (int64_t r = 0; r < rows; ++r)
        encode_mxfp4_row(&x[r * cols], cols, &bytes[r * cols / 2], &scales[r * cols / kMxfp4Group],
                         &rounded[r * cols]);
      scales_[logical + "_scale"] = std::move(scales);
    } else {
      const size_t n = t.nbytes() / dtype_size(t.dtype);
      check(x.size() == n, t.name, ": ", x.size(), " values where the layout needs ", n);
      encode(t.dtype, x, bytes.data(), rounded.data());
    }
    note_error(t.name, x, rounded);
    w.append(bytes.data(), bytes.size());
    report_.bytes += bytes.size();
  }
  const ConvertReport& report() const { return report_; }

 private:
  static void encode_mxfp4_row(const float* x, int64_t cols, uint8_t* packed, uint8_t* scales,
                               float* rounded) {
    for (int64_t g = 0; g < cols / kMxfp4Group; ++g)
      scales[g] = mxfp4_choose_scale(x + g * kMxfp4Group, kMxfp4Group);
    mxfp4_encode_row(x, scales, cols, packed);
    mxfp4_decode_row(packed, scales, cols, rounded);
  }
  static void encode(DType dtype, const std::vector<float>& x, uint8_t* dst, float* rounded) {
    if (dtype == DType::bf16) {
      for (size_t i = 0; i < x.size(); ++i) {
        const uint16_t b = f32_to_bf16(x[i]);
        std::memcpy(dst + 2 * i, &b, 2);
        rounded[i] = bf16_to_f32(b);
      }
      return;
    }
    check(dtype == DType::f32, "internal: convert writes BF16, F32 or MXFP4 only");
    std::memcpy(dst, x.data(), x.size() * 4);
    std::memcpy(rounded, x.data(), x.size() * 4);
  }
  void note_error(const std::string& name, const std::vector<float>& x,
                  const std::vector<float>& rounded) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      num += (static_cast<double>(rounded[i]) - x[i]) * (static_cast<double>(rounded[i]) - x[i]);
      den += static_cast<double>(x[i]) * x[i];
    }
    const double rel = den > 0 ? std::sqrt(num / den) : 0.0;
    if (rel > report_.max_rel_rounding) {
      report_.max_rel_rounding = rel;
      report_.worst_tensor = name;
    }
  }

  const ParamSet& params_;
  std::map<std::string, std::vector<uint8_t>> scales_;
  ConvertReport report_;
};

}  // namespace

ConvertReport convert_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                 const InitOptions& opt) {
  check(fs::weakly_canonical(in_dir) != fs::weakly_canonical(out_dir),
        "the output directory must differ from the input");
  const Checkpoint ckpt(in_dir);  // validates config and every tensor
  const ParamSet params = ParamSet::from_checkpoint(ckpt);
  nlohmann::json config = read_config(in_dir);
  config.erase("quantization_config");
  if (config.contains("text_config")) config["torch_dtype"] = "bfloat16";
  Converter conv(params);
  write_official_checkpoint(
      official_config(config, opt.mxfp4), out_dir, opt,
      [&](const PlannedTensor& t, SafetensorsWriter& w) { conv.write(t, w); });
  for (const char* name : kTokenizerFiles) {
    const fs::path src = fs::path(in_dir) / name;
    if (fs::exists(src))
      fs::copy_file(src, fs::path(out_dir) / name, fs::copy_options::overwrite_existing);
  }
  return conv.report();
}

}  // namespace k3
