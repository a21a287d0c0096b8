#include "tokenizer/utf8.h"

namespace k3::tok {

namespace {

// Number of continuation bytes a lead byte announces and the allowed range of the first
// continuation byte (Unicode Table 3-7); 0 continuation bytes marks a byte that cannot start a
// sequence (or ASCII, told apart by the caller).
struct Lead {
  int n_cont;
  unsigned char lo, hi;
};

Lead lead_of(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {2, 0x80, 0xBF};
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {3, 0x80, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};
  return {0, 0, 0};
}

// Length of the well-formed prefix of the sequence starting at p (1 + valid continuation bytes
// present, stopping at the first wrong byte or at the end). `complete` says whether the whole
// sequence is there.
size_t well_formed_prefix(const unsigned char* p, size_t avail, const Lead& lead, bool* complete) {
  size_t k = 1;
  for (int i = 0; i < lead.n_cont; ++i, ++k) {
    if (k >= avail) {
      *complete = false;
      return k;
    }
    unsigned char lo = i == 0 ? lead.lo : 0x80, hi = i == 0 ? lead.hi : 0xBF;
    if (p[k] < lo || p[k] > hi) {
      *complete = false;
      return k;
    }
  }
  *complete = true;
  return k;
}

const char kReplacement[] = "\xEF\xBF\xBD";

}  // namespace

}  // namespace k3::tok

namespace k3 {

// Public (k3/tokenizer.h); the helpers above are tok's.
size_t find_invalid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const tok::Lead lead = tok::lead_of(p[i]);
    if (lead.n_cont == 0) return i;
    bool complete = false;
    size_t k = tok::well_formed_prefix(p + i, n - i, lead, &complete);
    if (!complete) return i;
    i += k;
  }
  return std::string_view::npos;
}

}  // namespace k3

namespace k3::tok {

size_t append_utf8_replacing(std::string& out, const unsigned char* p, size_t n, bool final) {
  size_t i = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && p[run] < 0x80) ++run;
    out.append(reinterpret_cast<const char*>(p + i), run - i);
    i = run;
    if (i >= n) break;
    Lead lead = lead_of(p[i]);
    if (lead.n_cont == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    bool complete = false;
    size_t k = well_formed_prefix(p + i, n - i, lead, &complete);
    if (complete) {
      out.append(reinterpret_cast<const char*>(p + i), k);
    } else if (i + k >= n && !final) {
      return i;  // may still be completed by the next bytes
    } else {
      out += kReplacement;
    }
    i += k;
  }
  return n;
}

std::string utf8_replace_invalid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_utf8_replacing(out, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                        true);
  return out;
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t used = append_utf8_replacing(out, reinterpret_cast<const unsigned char*>(pending_.data()),
                                      pending_.size(), false);
  pending_.erase(0, used);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = utf8_replace_invalid(pending_);
  pending_.clear();
  return out;
}

}  // namespace k3::tok
