// The safetensors reader on arbitrary bytes: a file is either rejected with k3::Error or every
// tensor it lists lies inside the file, with a size that matches dtype x shape (each byte is read,
// so ASan sees any pointer past the mapping).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_common.h"
#include "k3/error.h"
#include "loader/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      k3::fuzz::scratch_file("model.safetensors", {reinterpret_cast<const char*>(data), size});
  try {
    const k3::SafetensorsFile file(path);
    for (const auto& [name, t] : file.tensors()) {
      k3::fuzz::require(t.nbytes == static_cast<size_t>(t.numel()) * k3::dtype_size(t.dtype),
                        "nbytes == numel x dtype size");
      unsigned sum = 0;
      for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
      (void)sum;
    }
  } catch (const k3::Error&) {
  }
  return 0;
}
