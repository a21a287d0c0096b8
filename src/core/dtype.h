// Element types, named as safetensors names them (BF16, F32, …). One enum for the checkpoint
// reader and for step tensors.
#pragma once

#include <cstddef>
#include <cstdint>

namespace k3 {

enum class DType : uint8_t { bf16, f16, f32, u8, i32, i64 };

const char* dtype_name(DType t);  // "BF16", "F32", …
size_t dtype_size(DType t);       // bytes per element

}  // namespace k3
