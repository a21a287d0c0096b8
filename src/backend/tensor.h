// Tensor: a typed, strided view of memory on a device. Tensors never own memory: step
// temporaries come from the step's arena, state from the state pool, weights from the mapped
// checkpoint. Shapes are outermost first ([T, H, K]); strides count elements.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/error.h"

namespace k3 {

enum class Device : uint8_t { cpu, cuda };

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}

struct Tensor {
  static constexpr int kMaxDims = 4;
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};

  // A contiguous view of existing memory.
  template <typename T>
  static Tensor of(T* data, std::initializer_list<int64_t> shape, Device dev = Device::cpu) {
    return contiguous(const_cast<std::remove_const_t<T>*>(data), dtype_of<std::remove_const_t<T>>(),
                      shape, dev);
  }
  static Tensor contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                           Device dev = Device::cpu);
  // A view with explicit strides (in elements; 0 repeats the same elements along a dimension).
  static Tensor strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                        std::initializer_list<int64_t> stride, Device dev = Device::cpu);

  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const;
  bool is_contiguous() const;
  // Rows r0 … r0+n-1 of the outermost dimension.
  Tensor rows(int64_t r0, int64_t n) const;
  // Elements begin … begin+n-1 of the last dimension (a strided view of the same memory).
  Tensor slice_last(int64_t begin, int64_t n) const;
  // The same memory as a contiguous tensor of another shape (same element count).
  Tensor view(std::initializer_list<int64_t> shape) const;

  // Typed pointer; throws when the dtype differs.
  template <typename T>
  T* ptr() const {
    check(dtype == dtype_of<T>(), "tensor: expected ", dtype_name(dtype_of<T>()), ", found ",
          dtype_name(dtype));
    return static_cast<T*>(data);
  }
  float* f32() const { return ptr<float>(); }
};

// A new uninitialised contiguous tensor from the arena (host memory).
Tensor arena_tensor(Arena& arena, DType dtype, std::initializer_list<int64_t> shape);

}  // namespace k3
