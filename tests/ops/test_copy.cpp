// The strided copy against its plain 4-loop reference: contiguous rows, slices of the last
// dimension, transposes, broadcasts (source stride 0), and the exact layouts the MLA layer uses.
// The destination starts poisoned, so an unwritten element shows.
#include <gtest/gtest.h>

#include <array>

#include "ops/copy/copy.h"
#include "ops/harness.h"

namespace k3::test {
namespace {

struct Layout {
  std::string name;
  CopyShape s;
  int64_t src_size, dst_size;  // elements the strides reach
};

// Elements a strided shape spans (the largest offset + 1).
int64_t span(const int64_t* shape, const int64_t* stride) {
  int64_t last = 0;
  for (int k = 0; k < 4; ++k) last += (shape[k] - 1) * stride[k];
  return last + 1;
}

Layout layout(std::string name, std::array<int64_t, 4> shape, std::array<int64_t, 4> src,
              std::array<int64_t, 4> dst) {
  Layout l{std::move(name), {}, 0, 0};
  for (int k = 0; k < 4; ++k) {
    l.s.shape[k] = shape[k];
    l.s.src_stride[k] = src[k];
    l.s.dst_stride[k] = dst[k];
  }
  l.src_size = span(l.s.shape, l.s.src_stride);
  l.dst_size = span(l.s.shape, l.s.dst_stride);
  return l;
}

OpCase copy_case(const Layout& l) {
  return {"copy", l.name, 0.0, [=](std::mt19937_64& rng, Impl impl) {
            const std::vector<float> src = randn(rng, l.src_size);
            std::vector<float> got(l.dst_size, -7.25f), want(l.dst_size, -7.25f);
            kCopyOp.ref(src.data(), l.s, want.data());
            kCopyOp.get(impl)(src.data(), l.s, got.data());
            return Outputs{got, widen(want)};
          }};
}

std::vector<OpCase> cases() {
  const int64_t n = 5, H = 3, Dn = 4, Dr = 2, Dv = 3, Dc = 6;
  std::vector<Layout> ls = {
      layout("one element", {1, 1, 1, 1}, {0, 0, 0, 1}, {0, 0, 0, 1}),
      layout("contiguous 7x33", {1, 1, 7, 33}, {0, 0, 33, 1}, {0, 0, 33, 1}),
      layout("last-dim slice", {1, 1, n, Dc}, {0, 0, Dc + Dr, 1}, {0, 0, Dc, 1}),
      layout("transpose 9x13", {1, 1, 9, 13}, {0, 0, 1, 9}, {0, 0, 13, 1}),
      layout("broadcast rows", {1, 1, 6, 11}, {0, 0, 0, 1}, {0, 0, 11, 1}),
      // MLA expand_kv: k^N from kv [n, H, Dn+Dv] into k [n, H, Dn+Dr], then r broadcast.
      layout("mla k nope", {1, n, H, Dn}, {0, H * (Dn + Dv), Dn + Dv, 1},
             {0, H * (Dn + Dr), Dn + Dr, 1}),
      layout("mla r broadcast", {1, n, H, Dr}, {0, Dc + Dr, 0, 1}, {0, H * (Dn + Dr), Dn + Dr, 1}),
      layout("4-d strided", {2, 3, 4, 5}, {97, 29, 7, 1}, {60, 20, 5, 1}),
      layout("large rows (threaded)", {1, 1, 300, 257}, {0, 0, 260, 1}, {0, 0, 257, 1}),
  };
  std::vector<OpCase> v;
  for (const Layout& l : ls) v.push_back(copy_case(l));
  return v;
}

static Register reg(cases());

}  // namespace
}  // namespace k3::test
