#include "k3/npy.h"

#include <cstring>
#include <fstream>

#include "core/error.h"

namespace k3 {

void npy_write_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dims;
  int64_t count = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ",";
    count *= d;
  }
  if (shape.size() > 1) dims.pop_back();
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic(6) + version(2) + len(2) + header + '\n' must be a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  check(f.good(), "cannot write ", path);
  const char magic[] = "\x93NUMPY\x01\x00";
  f.write(magic, 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * 4));
  check(f.good(), "error writing ", path);
}

static std::vector<int64_t> parse_shape(const std::string& header, const std::string& path) {
  size_t a = header.find("'shape': (");
  check(a != std::string::npos, path, ": NPY header has no shape");
  a += 10;
  size_t b = header.find(')', a);
  std::vector<int64_t> shape;
  std::string num;
  for (size_t i = a; i <= b; ++i) {
    char c = header[i];
    if (c >= '0' && c <= '9') {
      num += c;
    } else if (!num.empty()) {
      shape.push_back(std::stoll(num));
      num.clear();
    }
  }
  return shape;
}

NpyArray npy_read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "cannot open ", path);
  char pre[10];
  f.read(pre, 10);
  check(f.good() && std::memcmp(pre, "\x93NUMPY", 6) == 0, path, ": not an NPY file");
  check(pre[6] == 1, path, ": only NPY format 1.0 is supported");
  uint16_t len;
  std::memcpy(&len, pre + 8, 2);
  std::string header(len, '\0');
  f.read(header.data(), len);
  check(header.find("'fortran_order': False") != std::string::npos, path, ": Fortran order");
  bool f8 = header.find("'<f8'") != std::string::npos;
  check(f8 || header.find("'<f4'") != std::string::npos, path, ": dtype must be <f4 or <f8");
  NpyArray arr;
  arr.shape = parse_shape(header, path);
  int64_t count = 1;
  for (int64_t d : arr.shape) count *= d;
  arr.data.resize(static_cast<size_t>(count));
  if (f8) {
    std::vector<double> tmp(arr.data.size());
    f.read(reinterpret_cast<char*>(tmp.data()), static_cast<std::streamsize>(count * 8));
    for (size_t i = 0; i < tmp.size(); ++i) arr.data[i] = static_cast<float>(tmp[i]);
  } else {
    f.read(reinterpret_cast<char*>(arr.data.data()), static_cast<std::streamsize>(count * 4));
  }
  check(f.good(), path, ": truncated NPY data");
  return arr;
}

}  // namespace k3
