// gemm_acc micro-kernels for AVX-512 (F), 16 lanes: tiles of up to 8 rows x 32 columns held in
// 16 zmm accumulators. Built with the AVX-512 flags (CMakeLists.txt: files named
// *_avx512.cpp); runs only when cpu_isa picks avx512.
#include <immintrin.h>

#include <cstdint>

#include "core/gemm_kernels.h"

namespace k3::avx512 {
namespace {

constexpr int kLanes = 16, kMaxRows = 8, kMaxVecs = 2;

using TileFn = void (*)(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                        int64_t ldb, float* c, int64_t ldc, __mmask16 last);

// c[R, NV*16] += A[R, kc] · b[kc, NV*16], the last vector restricted to the lanes in `last`
// (masked loads and stores touch nothing past the tile's columns).
template <int R, int NV>
void tile_fixed(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
                float* c, int64_t ldc, __mmask16 last) {
  auto load = [&](const float* p, int v) {
    return v == NV - 1 ? _mm512_maskz_loadu_ps(last, p) : _mm512_loadu_ps(p);
  };
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = load(c + r * ldc + v * kLanes, v);
  }
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * ldb;
    __m512 bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = load(bp + v * kLanes, v);
    const float* ap = a + p * a_cs;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(ap[r * a_rs]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* out = c + r * ldc + v * kLanes;
      if (v == NV - 1) {
        _mm512_mask_storeu_ps(out, last, acc[r][v]);
      } else {
        _mm512_storeu_ps(out, acc[r][v]);
      }
    }
  }
}

template <int NV>
TileFn pick_rows(int64_t rows) {
  constexpr TileFn fns[kMaxRows] = {tile_fixed<1, NV>, tile_fixed<2, NV>, tile_fixed<3, NV>,
                                    tile_fixed<4, NV>, tile_fixed<5, NV>, tile_fixed<6, NV>,
                                    tile_fixed<7, NV>, tile_fixed<8, NV>};
  return fns[rows - 1];
}

void tile(int64_t rows, int64_t cols, int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
          const float* b, int64_t ldb, float* c, int64_t ldc) {
  const int64_t nv = (cols + kLanes - 1) / kLanes, last = cols - (nv - 1) * kLanes;
  const __mmask16 mask = static_cast<__mmask16>((1u << last) - 1u);
  TileFn fn = nv == 1 ? pick_rows<1>(rows) : pick_rows<2>(rows);
  fn(kc, a, a_rs, a_cs, b, ldb, c, ldc, mask);
}

}  // namespace

const GemmKernels kGemmKernels{"avx512", kMaxRows, kMaxVecs* kLanes, tile};

}  // namespace k3::avx512
