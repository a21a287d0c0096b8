// Minimal NPY (format 1.0) reader/writer for float32 C-order arrays: the exchange format between
// the engine (`k3 logits`) and external references. Errors (unreadable file, unsupported
// dtype or layout) are thrown as k3::Error naming the file.
//
//   k3::npy_write_f32("logits.npy", {n_tokens, vocab}, logits.data());
//   k3::NpyArray a = k3::npy_read_f32("logits.npy");   // a.shape == {n_tokens, vocab}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace k3 {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

void npy_write_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
NpyArray npy_read_f32(const std::string& path);  // accepts '<f4' and '<f8' (narrowed to f32)

}  // namespace k3
