// gemm_acc micro-kernels for AVX2 + FMA, 8 lanes: tiles of up to 6 rows x 16 columns held in
// 12 ymm accumulators. Built with -mavx2 -mfma -mf16c (CMakeLists.txt: files named
// *_avx2.cpp); runs only when cpu_isa picks avx2.
#include <immintrin.h>

#include <cstdint>

#include "core/gemm_kernels.h"

namespace k3::avx2 {
namespace {

constexpr int kLanes = 8, kMaxRows = 6, kMaxVecs = 2;

using TileFn = void (*)(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                        int64_t ldb, float* c, int64_t ldc, __m256i mask);

// c[R, NV*8] += A[R, kc] · b[kc, NV*8]; with Masked the last vector covers only the lanes set
// in `mask` (masked loads and stores touch nothing past the tile's columns).
template <int R, int NV, bool Masked>
void tile_fixed(int64_t kc, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
                float* c, int64_t ldc, __m256i mask) {
  auto load = [&](const float* p, int v) {
    return Masked && v == NV - 1 ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
  };
  __m256 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = load(c + r * ldc + v * kLanes, v);
  }
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * ldb;
    __m256 bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = load(bp + v * kLanes, v);
    const float* ap = a + p * a_cs;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(ap + r * a_rs);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* out = c + r * ldc + v * kLanes;
      if (Masked && v == NV - 1) {
        _mm256_maskstore_ps(out, mask, acc[r][v]);
      } else {
        _mm256_storeu_ps(out, acc[r][v]);
      }
    }
  }
}

template <int NV, bool Masked>
TileFn pick_rows(int64_t rows) {
  constexpr TileFn fns[kMaxRows] = {tile_fixed<1, NV, Masked>, tile_fixed<2, NV, Masked>,
                                    tile_fixed<3, NV, Masked>, tile_fixed<4, NV, Masked>,
                                    tile_fixed<5, NV, Masked>, tile_fixed<6, NV, Masked>};
  return fns[rows - 1];
}

void tile(int64_t rows, int64_t cols, int64_t kc, const float* a, int64_t a_rs, int64_t a_cs,
          const float* b, int64_t ldb, float* c, int64_t ldc) {
  const int64_t nv = (cols + kLanes - 1) / kLanes, last = cols - (nv - 1) * kLanes;
  const bool masked = last != kLanes;
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(last)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  TileFn fn = nv == 1 ? (masked ? pick_rows<1, true>(rows) : pick_rows<1, false>(rows))
                      : (masked ? pick_rows<2, true>(rows) : pick_rows<2, false>(rows));
  fn(kc, a, a_rs, a_cs, b, ldb, c, ldc, mask);
}

}  // namespace

const GemmKernels kGemmKernels{"avx2", kMaxRows, kMaxVecs* kLanes, tile};

}  // namespace k3::avx2
