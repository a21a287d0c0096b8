// The CPU backend: host memory and memcpy. It implements every registered op (each op's
// `cpu` slot, or its reference when no faster version exists).
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/backend.h"
#include "ops/registry.h"

namespace k3 {

void Backend::zero(void* dst, size_t bytes) { std::memset(dst, 0, bytes); }
void Backend::copy_rows_to_host_async(void* dst, size_t dpitch, const void* src, size_t spitch,
                                      size_t width, size_t rows) {
  for (size_t r = 0; r < rows; ++r) {
    std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                width);
  }
}
void* Backend::alloc_host(size_t bytes) { return ::operator new(bytes == 0 ? 1 : bytes); }
void Backend::free_host(void* p) { ::operator delete(p); }

namespace {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu; }
  const char* name() const override { return "cpu"; }
  void* alloc(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    check(p != nullptr, "cpu backend: out of memory allocating ", bytes, " bytes");
    return p;
  }
  void free(void* p) override { std::free(p); }
  void copy_to_device(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_on_device(void* dst, const void* src, size_t n) override { std::memmove(dst, src, n); }
  void sync() override {}
  bool supports_op(std::string_view op) const override {
    const OpInfo* info = find_op(op);
    return info != nullptr && info->has_cpu;
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace k3
