#include "loader/safetensors_writer.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace k3 {

size_t PlannedTensor::nbytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path,
                                     const std::vector<PlannedTensor>& tensors)
    : path_(path) {
  nlohmann::ordered_json h;
  h["__metadata__"] = {{"format", "pt"}};
  size_t off = 0;
  for (const PlannedTensor& t : tensors) {
    h[t.name] = {{"dtype", dtype_name(t.dtype)},
                 {"shape", t.shape},
                 {"data_offsets", {off, off + t.nbytes()}}};
    off += t.nbytes();
  }
  expected_ = off;
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  f_ = std::fopen(path.c_str(), "wb");
  check(f_ != nullptr, "cannot create ", path, ": ", std::strerror(errno));
  uint64_t n = header.size();
  append(&n, 8);
  append(header.data(), header.size());
  written_ = 0;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (f_) std::fclose(f_);
}

void SafetensorsWriter::append(const void* data, size_t n) {
  check(std::fwrite(data, 1, n, f_) == n, "error writing ", path_, ": ", std::strerror(errno));
  written_ += n;
}

void SafetensorsWriter::finish() {
  check(written_ == expected_, path_, ": wrote ", written_, " data bytes, planned ", expected_);
  check(std::fclose(f_) == 0, "error closing ", path_, ": ", std::strerror(errno));
  f_ = nullptr;
}

}  // namespace k3
