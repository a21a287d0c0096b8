// The cuts K3's `encode` makes before tiktoken sees the text (spec §10.4): slices of at most
// 400,000 code points, each cut again wherever a run of whitespace or of non-whitespace (Python
// str.isspace) would pass 25,000 code points. The pieces are encoded independently, so a cut is
// also a pre-token boundary and can split a special token's text.
#pragma once

#include <string_view>
#include <vector>

namespace k3::tok {

constexpr size_t kMaxSliceChars = 400'000;
constexpr size_t kMaxRunChars = 25'000;

// Appends the non-empty pieces of `text` (valid UTF-8) to `out`, in order.
void split_for_encode(std::string_view text, std::vector<std::string_view>& out,
                      size_t max_slice_chars = kMaxSliceChars, size_t max_run_chars = kMaxRunChars);

}  // namespace k3::tok
