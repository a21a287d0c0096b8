#include "core/dtype.h"

namespace k3 {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::f32:
      return "F32";
    case DType::u8:
      return "U8";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::bf16:
    case DType::f16:
      return 2;
    case DType::u8:
      return 1;
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
  }
  return 0;
}

}  // namespace k3
