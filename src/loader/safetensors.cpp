#include "loader/safetensors.h"

#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "k3/json_depth.h"

namespace k3 {

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string TensorInfo::shape_str() const { return k3::shape_str(shape); }

namespace {

DType parse_dtype(const std::string& s, const std::string& where) {
  if (s == "BF16") return DType::bf16;
  if (s == "F16") return DType::f16;
  if (s == "F32") return DType::f32;
  if (s == "U8") return DType::u8;
  fail(where, ": unsupported dtype '", s, "' (supported: BF16, F16, F32, U8)");
}

TensorInfo parse_entry(const std::string& name, const nlohmann::json& e, const uint8_t* base,
                       size_t data_size, const std::string& path) {
  std::string where = path + ": tensor '" + name + "'";
  check(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"),
        where, ": header entry needs dtype, shape and data_offsets");
  check(e["dtype"].is_string(), where, ": dtype must be a string");
  TensorInfo t;
  t.name = name;
  t.file = path;
  t.dtype = parse_dtype(e["dtype"].get<std::string>(), where);
  check(e["shape"].is_array(), where, ": shape must be a list");
  for (const auto& d : e["shape"]) {
    K3_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0), where,
             ": bad dimension ", d.dump());
    t.shape.push_back(d.get<int64_t>());
  }
  const auto& off = e["data_offsets"];
  check(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
            off[1].is_number_unsigned(),
        where, ": data_offsets must be two non-negative integers");
  uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  check(begin <= end && end <= data_size, where, ": data_offsets [", begin, ", ", end,
        ") run past the end of the data (", data_size, " bytes; truncated file?)");
  // Overflow-safe size: a hostile shape must not wrap around to a size that looks right.
  uint64_t want = dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    K3_CHECK(d == 0 || want <= (uint64_t{1} << 62) / static_cast<uint64_t>(d), where, ": shape ",
             t.shape_str(), " is too large");
    want *= static_cast<uint64_t>(d);
  }
  K3_CHECK(end - begin == want, where, ": holds ", end - begin, " bytes but ", dtype_name(t.dtype),
           " ", t.shape_str(), " needs ", want);
  t.data = base + begin;
  t.nbytes = end - begin;
  return t;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_unique<MappedFile>(path)) {
  const uint8_t* p = file_->data();
  size_t size = file_->size();
  check(size >= 8, path, ": file is ", size, " bytes, too short for a safetensors header");
  uint64_t n = 0;
  std::memcpy(&n, p, 8);
  check(n <= size - 8, path, ": header length ", n, " exceeds the file size ", size,
        " (truncated or not a safetensors file)");
  check_json_depth({reinterpret_cast<const char*>(p + 8), n}, path + ": header");
  nlohmann::json header = nlohmann::json::parse(p + 8, p + 8 + n, nullptr, false);
  check(!header.is_discarded() && header.is_object(), path,
        ": corrupt safetensors header (not a JSON object)");
  const uint8_t* base = p + 8 + n;
  size_t data_size = size - 8 - n;
  data_bytes_ = data_size;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    tensors_.emplace(it.key(), parse_entry(it.key(), it.value(), base, data_size, path));
  }
  copy_misaligned();
}

void SafetensorsFile::copy_misaligned() {
  size_t copied = 0, bytes = 0;
  for (auto& [name, t] : tensors_) {
    if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0) continue;
    auto& copy = aligned_copies_.emplace_back(new uint64_t[(t.nbytes + 7) / 8]);
    std::memcpy(copy.get(), t.data, t.nbytes);
    t.data = reinterpret_cast<const uint8_t*>(copy.get());
    ++copied;
    bytes += t.nbytes;
  }
  if (copied > 0) {
    std::cerr << "k3: note: " << path() << ": copied " << copied << " tensor(s), " << bytes
              << " bytes, stored at offsets not aligned to their element size\n";
  }
}

}  // namespace k3
