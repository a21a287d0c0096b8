// A read view of rows stored in fixed-size blocks (the paged MLA latent cache): row t is at
// base + blocks[t / block_tokens] * block_stride + (t % block_tokens) * width.
// A contiguous [S, width] buffer is the special case contiguous_rows().
#pragma once

#include <cstdint>
#include <limits>

namespace k3 {

struct PagedRows {
  const float* base = nullptr;
  const int32_t* blocks = nullptr;
  int64_t block_tokens = 0;
  int64_t block_stride = 0;  // floats between consecutive blocks
  int64_t width = 0;         // floats per row
  const float* row(int64_t t) const {
    return base + blocks[t / block_tokens] * block_stride + (t % block_tokens) * width;
  }
};

inline PagedRows contiguous_rows(const float* data, int64_t width) {
  static constexpr int32_t kBlockZero = 0;
  return {data, &kBlockZero, std::numeric_limits<int64_t>::max(), 0, width};
}

}  // namespace k3
