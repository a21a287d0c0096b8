// A read-only file in memory: mapped, or read once into 2 MB pages where it fits
// (mapped_file.cpp says when and why). Weights are used in place from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace k3 {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws k3::Error naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes to unmap
};

}  // namespace k3
