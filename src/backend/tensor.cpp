#include "backend/tensor.h"

namespace k3 {

Tensor Tensor::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                          Device dev) {
  check(shape.size() >= 1 && shape.size() <= kMaxDims, "tensor: ", shape.size(),
        " dimensions (1 to ", kMaxDims, " supported)");
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = dev;
  t.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t st = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.stride[d] = st;
    st *= t.shape[d];
  }
  return t;
}

Tensor Tensor::strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                       std::initializer_list<int64_t> stride, Device dev) {
  check(shape.size() == stride.size(), "tensor: ", shape.size(), " dimensions but ", stride.size(),
        " strides");
  Tensor t = contiguous(data, dtype, shape, dev);
  int i = 0;
  for (int64_t st : stride) t.stride[i++] = st;
  return t;
}

Tensor Tensor::slice_last(int64_t begin, int64_t n) const {
  const int last = ndim - 1;
  check(begin >= 0 && n >= 0 && begin + n <= shape[last], "tensor: elements ", begin, "+", n,
        " of a last dimension of ", shape[last]);
  Tensor t = *this;
  t.data =
      static_cast<char*>(data) + begin * stride[last] * static_cast<int64_t>(dtype_size(dtype));
  t.shape[last] = n;
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool Tensor::is_contiguous() const {
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != st) return false;
    st *= shape[d];
  }
  return true;
}

Tensor Tensor::rows(int64_t r0, int64_t n) const {
  check(r0 >= 0 && n >= 0 && r0 + n <= shape[0], "tensor: rows ", r0, "+", n, " of ", shape[0]);
  Tensor t = *this;
  t.data = static_cast<char*>(data) + r0 * stride[0] * static_cast<int64_t>(dtype_size(dtype));
  t.shape[0] = n;
  return t;
}

Tensor Tensor::view(std::initializer_list<int64_t> new_shape) const {
  check(is_contiguous(), "tensor: view of a non-contiguous tensor");
  Tensor t = contiguous(data, dtype, new_shape, device);
  check(t.numel() == numel(), "tensor: view of ", numel(), " elements as ", t.numel());
  return t;
}

Tensor arena_tensor(Arena& arena, DType dtype, std::initializer_list<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return Tensor::contiguous(arena.alloc_bytes(static_cast<size_t>(n) * dtype_size(dtype)), dtype,
                            shape);
}

}  // namespace k3
