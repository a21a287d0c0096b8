// Streaming safetensors writer: the header is written first from the planned tensor list,
// then each tensor's bytes are appended in order, so arbitrarily large shards are written
// without holding them in memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "loader/safetensors.h"

namespace k3 {

struct PlannedTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  size_t nbytes() const;
};

class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, const std::vector<PlannedTensor>& tensors);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void append(const void* data, size_t n);  // the next bytes, in planned order
  void finish();                            // checks every planned byte was written

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  size_t expected_ = 0, written_ = 0;
};

}  // namespace k3
