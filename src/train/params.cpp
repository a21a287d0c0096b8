#include "train/params.h"

#include <algorithm>

#include "core/bf16.h"
#include "core/error.h"
#include "loader/safetensors_writer.h"
#include "ops/mxfp4/mxfp4.h"

namespace k3 {
namespace {

const std::string kPacked = ".weight_packed", kScale = ".weight_scale";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<float> widen(const TensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::f32) {
    std::copy_n(reinterpret_cast<const float*>(t.data), v.size(), v.begin());
  } else if (t.dtype == DType::bf16) {
    const auto* b = reinterpret_cast<const uint16_t*>(t.data);
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(b[i]);
  } else {
    throw Error(cat("training parameters: tensor ", t.name, " has dtype ", dtype_name(t.dtype),
                    " (expected BF16, F32 or an MXFP4 pair)"));
  }
  return v;
}

// packed [rows, cols/2] + scales [rows, cols/32] -> W [rows, cols].
Param dequantize(const TensorInfo& packed, const TensorInfo& scales) {
  const int64_t rows = packed.shape.at(0), cols = packed.shape.at(1) * 2;
  Param p{{rows, cols}, std::vector<float>(static_cast<size_t>(rows * cols))};
  for (int64_t r = 0; r < rows; ++r) {
    mxfp4_decode_row(packed.data + r * (cols / 2), scales.data + r * (cols / kMxfp4Group), cols,
                     p.value.data() + r * cols);
  }
  return p;
}

}  // namespace

ParamSet ParamSet::from_checkpoint(const Checkpoint& ckpt) {
  ParamSet s;
  for (const auto& [name, info] : ckpt.tensors()) {
    if (ends_with(name, kScale)) continue;  // read with its packed half
    if (ends_with(name, kPacked)) {
      const std::string base = name.substr(0, name.size() - kPacked.size());
      s.params_[base + ".weight"] = dequantize(*info, ckpt.tensor(base + kScale));
    } else {
      s.params_[name] = Param{info->shape, widen(*info)};
    }
  }
  return s;
}

ParamSet ParamSet::zeros_like() const {
  ParamSet z;
  for (const auto& [name, p] : params_) {
    z.params_[name] = Param{p.shape, std::vector<float>(p.value.size(), 0.0f)};
  }
  return z;
}

float* ParamSet::operator[](const std::string& name) {
  auto it = params_.find(name);
  check(it != params_.end(), "training parameters: no tensor ", name);
  return it->second.value.data();
}

const float* ParamSet::operator[](const std::string& name) const {
  auto it = params_.find(name);
  check(it != params_.end(), "training parameters: no tensor ", name);
  return it->second.value.data();
}

void ParamSet::write_safetensors(const std::string& path, const std::string& strip_prefix) const {
  std::vector<PlannedTensor> plan;
  for (const auto& [name, p] : params_) {
    const bool strip = !strip_prefix.empty() && name.rfind(strip_prefix, 0) == 0;
    plan.push_back({strip ? name.substr(strip_prefix.size()) : name, DType::f32, p.shape});
  }
  SafetensorsWriter w(path, plan);
  for (const auto& [name, p] : params_) w.append(p.value.data(), p.value.size() * sizeof(float));
  w.finish();
}

}  // namespace k3
