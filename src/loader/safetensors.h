// Safetensors reading (spec §9.1): u64 LE header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end)}} with offsets relative to byte 8+N, then data.
// Tensors point into the memory-mapped file: nothing is copied, except a tensor whose bytes sit
// at an offset not aligned to its element size (legal in the format: the header length is free),
// which is copied once into aligned memory so every 16/32-bit load is aligned (a note says so).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace k3 {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::string file;  // shard path, for messages

  int64_t numel() const;
  std::string shape_str() const;  // "[3, 48]"
};

// One safetensors file, mapped. Every header field is validated on open: a corrupt header,
// offsets past the end, a size that does not match dtype x shape, or an unknown dtype throws
// k3::Error naming the file and the tensor.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::string& path() const { return file_->path(); }
  size_t data_bytes() const { return data_bytes_; }  // the data section after the header

 private:
  void copy_misaligned();

  std::unique_ptr<MappedFile> file_;
  std::map<std::string, TensorInfo> tensors_;
  std::vector<std::unique_ptr<uint64_t[]>> aligned_copies_;  // 8-byte aligned
  size_t data_bytes_ = 0;
};

std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace k3
