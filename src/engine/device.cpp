#include "k3/device.h"

#include <cstdlib>

#include "backend/cuda/cuda.h"
#include "core/error.h"

namespace k3 {
namespace {

std::string& chosen() {
  static std::string name;  // empty: not set by set_default_device
  return name;
}

}  // namespace

bool cuda_device_available() { return cuda_built() && cuda_available(); }

void set_default_device(const std::string& name) {
  check(name == "cpu" || name == "cuda", "unknown device '", name, "' (expected cpu or cuda)");
  if (name == "cuda") {
    check(cuda_built(),
          "device cuda: this build has no CUDA backend (configure with nvcc and "
          "K3_CUDA=ON)");
    check(cuda_available(), "device cuda: no usable CUDA device on this machine");
  }
  chosen() = name;
}

std::string default_device() {
  if (!chosen().empty()) return chosen();
  const char* env = std::getenv("K3_DEVICE");
  return env != nullptr && *env != 0 ? env : "cpu";
}

}  // namespace k3
