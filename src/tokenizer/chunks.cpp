#include "tokenizer/chunks.h"

#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

namespace k3::tok {

namespace {

// Cuts one slice where a run of same-kind (space / non-space) chars would exceed `limit`.
void cut_runs(std::string_view s, size_t limit, std::vector<std::string_view>& out) {
  const CharTable& table = char_table();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t start = 0, run = 0, i = 0;
  bool in_space = false;
  while (i < s.size()) {
    size_t len;
    uint32_t cp = decode_valid_utf8(p + i, &len);
    bool space = py_isspace(cp, table(cp));
    if (i == 0) in_space = space;
    if (space != in_space) {
      run = 1;
      in_space = space;
    } else if (++run > limit) {
      out.push_back(s.substr(start, i - start));
      start = i;
      run = 1;
    }
    i += len;
  }
  if (start < s.size()) out.push_back(s.substr(start));
}

}  // namespace

void split_for_encode(std::string_view text, std::vector<std::string_view>& out,
                      size_t max_slice_chars, size_t max_run_chars) {
  size_t start = 0, chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;  // continuation byte
    if (chars == max_slice_chars) {
      cut_runs(text.substr(start, i - start), max_run_chars, out);
      start = i;
      chars = 0;
    }
    ++chars;
  }
  if (start < text.size()) cut_runs(text.substr(start), max_run_chars, out);
}

}  // namespace k3::tok
