// The bf16-precision matmul on AMX tiles (TDPBF16PS), for CPUs where amx_bf16_usable().
// Built with the AVX-512 flags plus -mamx-tile -mamx-bf16 (CMakeLists.txt: files named
// *_amx.cpp); the rules of core/cpu_isa.h for per-ISA files hold here too.
//
// The product is computed transposed, y^T = W · x^T, so that the weights are the A operand and
// load straight from storage: an A tile is 16 weight rows x 32 columns (64 bytes a row, the
// row stride of the matrix), the B tile 16 column pairs x 16 tokens, which needs the
// activations in pairs-major order: pack_x writes them once per call (linear_bf16.cpp).
// C[r][t] = Σ_c Σ_pairs W[r][32c + 2p + j] · x[t][32c + 2p + j]: one fp32 accumulator per
// output, over the 32-column chunks in column order, the pairs in order inside a chunk
// (TDPBF16PS adds each product with round to nearest even; subnormal inputs read as zero and
// subnormal results flush to zero, as vdpbf16ps). That order is the same for every token and
// every batch size, so AMX results are batch invariant; they differ from the vdpbf16ps
// kernels' (16 lane sums and a tree) in the order of the fp32 additions only.
#include <immintrin.h>

#include <cstdint>

#include "ops/linear/linear_kernels.h"

namespace k3::amx {
namespace {

constexpr int64_t kTile = 16;   // rows of A and C, tokens of B and C
constexpr int64_t kChunk = 32;  // bf16 columns per A tile row (64 bytes)

// ldtilecfg's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// tmm0-3: C (rows x 16 fp32), tmm4-5: A (rows x 32 bf16), tmm6-7: B (16 pairs x 16 tokens).
void configure(int rows) {
  TileConfig c;
  for (int i = 0; i < 6; ++i) {
    c.rows[i] = static_cast<uint8_t>(rows);
    c.colsb[i] = 64;
  }
  for (int i = 6; i < 8; ++i) {
    c.rows[i] = kTile;
    c.colsb[i] = 64;
  }
  __asm__ volatile("" ::: "memory");  // the asm of ldtilecfg names only the first bytes
  _tile_loadconfig(&c);
}

// y[t][j] = c[j][t] for the rows and tokens that exist.
void scatter(const float* c, int64_t rows, int64_t tokens, float* y, int64_t ldy) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < rows; ++j) y[t * ldy + j] = c[j * kTile + t];
}

// One B tile per chunk, N weight tiles against it (N = 1..4, C tiles tmm0..N-1, the A tiles
// alternate tmm4 / tmm5 so a load need not wait for the previous product), the B tiles
// alternate tmm6 / tmm7 between chunks. Intrinsic register operands must be literals.
#define K3_AMX_CHUNK(BREG, c)                                    \
  do {                                                           \
    if (fetch) prefetch_ahead(w, cols, N, (c) + kAhead, chunks); \
    prefetch_b(xb, (c) + kAheadB, chunks);                       \
    _tile_loadd(BREG, xb + (c)*kTile * kChunk, 64);              \
    _tile_loadd(4, w + (c)*kChunk, stride);                      \
    _tile_dpbf16ps(0, 4, BREG);                                  \
    if constexpr (N > 1) {                                       \
      _tile_loadd(5, w + 1 * kTile * cols + (c)*kChunk, stride); \
      _tile_dpbf16ps(1, 5, BREG);                                \
    }                                                            \
    if constexpr (N > 2) {                                       \
      _tile_loadd(4, w + 2 * kTile * cols + (c)*kChunk, stride); \
      _tile_dpbf16ps(2, 4, BREG);                                \
    }                                                            \
    if constexpr (N > 3) {                                       \
      _tile_loadd(5, w + 3 * kTile * cols + (c)*kChunk, stride); \
      _tile_dpbf16ps(3, 5, BREG);                                \
    }                                                            \
  } while (0)

// A sweep over weights that are not in cache asks for each row's line kAhead chunks ahead:
// tile loads wait for memory in order, and 16-64 rows read side by side are more streams than
// the hardware prefetchers follow.
constexpr int64_t kAhead = 8;

void prefetch_ahead(const uint16_t* w, int64_t cols, int n_tiles, int64_t c, int64_t chunks) {
  if (c >= chunks) return;
  for (int64_t r = 0; r < n_tiles * kTile; ++r)
    _mm_prefetch(reinterpret_cast<const char*>(w + r * cols + c * kChunk), _MM_HINT_T0);
}

// The packed activations of a token tile are one contiguous run of B tiles, read in order but
// by tile loads, which the prefetchers do not run ahead of: with many tokens the run is larger
// than L2 and every task reads it again, so ask for each tile kAheadB chunks ahead.
constexpr int64_t kAheadB = 4;

void prefetch_b(const uint16_t* xb, int64_t c, int64_t chunks) {
  if (c >= chunks) return;
  const char* tile = reinterpret_cast<const char*>(xb + c * kTile * kChunk);
  for (int64_t line = 0; line < kTile * kChunk * 2; line += 64)
    _mm_prefetch(tile + line, _MM_HINT_T0);
}

// N tiles of `rows` weight rows each (16, or fewer for a lone tail tile, as configured) from
// w [.., cols]; all T tokens of the packed xp. y: the first row's outputs, leading dim ldy.
template <int N>
void tiles(const uint16_t* xp, int64_t T, const uint16_t* w, int64_t cols, int64_t rows, float* y,
           int64_t ldy) {
  const int64_t chunks = cols / kChunk, stride = cols * 2;
  alignas(64) float c[4][kTile * kTile];
  for (int64_t tb = 0; tb * kTile < T; ++tb) {
    const bool fetch = tb == 0 && rows == kTile;  // later token tiles find the rows in L2
    const uint16_t* xb = xp + tb * chunks * kTile * kChunk;
    _tile_zero(0);
    if constexpr (N > 1) _tile_zero(1);
    if constexpr (N > 2) _tile_zero(2);
    if constexpr (N > 3) _tile_zero(3);
    int64_t ch = 0;
    for (; ch + 1 < chunks; ch += 2) {
      K3_AMX_CHUNK(6, ch);
      K3_AMX_CHUNK(7, ch + 1);
    }
    if (ch < chunks) K3_AMX_CHUNK(6, ch);
    _tile_stored(0, c[0], 64);
    if constexpr (N > 1) _tile_stored(1, c[1], 64);
    if constexpr (N > 2) _tile_stored(2, c[2], 64);
    if constexpr (N > 3) _tile_stored(3, c[3], 64);
    const int64_t tokens = T - tb * kTile < kTile ? T - tb * kTile : kTile;
    for (int i = 0; i < N; ++i) scatter(c[i], rows, tokens, y + tb * kTile * ldy + i * kTile, ldy);
  }
}

#undef K3_AMX_CHUNK

// The same product from weights packed by pack_a: each A tile one contiguous kilobyte (rows
// 64 bytes apart), so a task's tiles sit in L2 without the set conflicts of rows a matrix row
// stride apart, and no weight prefetching is needed. Same chunk order, same sums.
template <int N>
void packed_tiles(const uint16_t* xp, int64_t T, const uint16_t* a, int64_t chunks, int64_t rows,
                  float* y, int64_t ldy) {
  constexpr int64_t kTileElems = kTile * kChunk;
  alignas(64) float c[4][kTile * kTile];
  for (int64_t tb = 0; tb * kTile < T; ++tb) {
    const uint16_t* xb = xp + tb * chunks * kTileElems;
    _tile_zero(0);
    if constexpr (N > 1) _tile_zero(1);
    if constexpr (N > 2) _tile_zero(2);
    if constexpr (N > 3) _tile_zero(3);
    for (int64_t ch = 0; ch < chunks; ++ch) {
      prefetch_b(xb, ch + kAheadB, chunks);
      _tile_loadd(6, xb + ch * kTileElems, 64);
      _tile_loadd(4, a + ch * kTileElems, 64);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (N > 1) {
        _tile_loadd(5, a + (chunks + ch) * kTileElems, 64);
        _tile_dpbf16ps(1, 5, 6);
      }
      if constexpr (N > 2) {
        _tile_loadd(4, a + (2 * chunks + ch) * kTileElems, 64);
        _tile_dpbf16ps(2, 4, 6);
      }
      if constexpr (N > 3) {
        _tile_loadd(5, a + (3 * chunks + ch) * kTileElems, 64);
        _tile_dpbf16ps(3, 5, 6);
      }
    }
    _tile_stored(0, c[0], 64);
    if constexpr (N > 1) _tile_stored(1, c[1], 64);
    if constexpr (N > 2) _tile_stored(2, c[2], 64);
    if constexpr (N > 3) _tile_stored(3, c[3], 64);
    const int64_t tokens = T - tb * kTile < kTile ? T - tb * kTile : kTile;
    for (int i = 0; i < N; ++i) {
      const int64_t r = rows - i * kTile < kTile ? rows - i * kTile : kTile;
      scatter(c[i], r, tokens, y + tb * kTile * ldy + i * kTile, ldy);
    }
  }
}

}  // namespace

int64_t packed_x_size(int64_t T, int64_t cols) { return (T + kTile - 1) / kTile * kTile * cols; }

// xp[tb][c][p][t][j] = x[16 tb + t][32 c + 2 p + j], zero for tokens past T: each (tb, c) is
// one B tile, 16 rows of 64 bytes.
void pack_x(const uint16_t* x, int64_t T, int64_t cols, uint16_t* xp) {
  const auto* x32 = reinterpret_cast<const uint32_t*>(x);  // column pairs
  auto* p32 = reinterpret_cast<uint32_t*>(xp);
  const int64_t pairs = cols / 2, chunks = cols / kChunk;
  for (int64_t tb = 0; tb * kTile < T; ++tb)
    for (int64_t c = 0; c < chunks; ++c) {
      uint32_t* tile = p32 + (tb * chunks + c) * kTile * kTile;
      for (int64_t p = 0; p < kTile; ++p)
        for (int64_t t = 0; t < kTile; ++t) {
          const int64_t tok = tb * kTile + t;
          tile[p * kTile + t] = tok < T ? x32[tok * pairs + c * kTile + p] : 0u;
        }
    }
}

int64_t packed_a_size(int64_t rows, int64_t cols) {
  return (rows + kTile - 1) / kTile * kTile * cols;
}

void pack_a_row(const uint16_t* row, int64_t j, int64_t cols, uint16_t* a) {
  uint16_t* tile_row = a_row_start(j, cols, a);
  for (int64_t c = 0; c < cols / kChunk; ++c)
    _mm512_store_si512(tile_row + c * kAStride, _mm512_loadu_si512(row + c * kChunk));
}

void zero_a_rows(int64_t j0, int64_t rows, int64_t cols, uint16_t* a) {
  for (int64_t j = j0; j < (rows + kTile - 1) / kTile * kTile; ++j) {
    uint16_t* tile_row = a_row_start(j, cols, a);
    for (int64_t c = 0; c < cols / kChunk; ++c)
      _mm512_store_si512(tile_row + c * kAStride, _mm512_setzero_si512());
  }
}

void gemm_packed(const uint16_t* xp, int64_t T, const uint16_t* a, int64_t cols, int64_t nr,
                 float* y, int64_t ldy) {
  __asm__ volatile("" ::: "memory");  // tileloadd's asm does not say it reads memory
  configure(kTile);
  const int64_t chunks = cols / kChunk, tiles = (nr + kTile - 1) / kTile;
  const int64_t tile_elems = chunks * kTile * kChunk;
  int64_t i = 0;
  for (; i + 4 <= tiles; i += 4)
    packed_tiles<4>(xp, T, a + i * tile_elems, chunks, nr - i * kTile, y + i * kTile, ldy);
  switch (tiles - i) {
    case 3:
      packed_tiles<3>(xp, T, a + i * tile_elems, chunks, nr - i * kTile, y + i * kTile, ldy);
      break;
    case 2:
      packed_tiles<2>(xp, T, a + i * tile_elems, chunks, nr - i * kTile, y + i * kTile, ldy);
      break;
    case 1:
      packed_tiles<1>(xp, T, a + i * tile_elems, chunks, nr - i * kTile, y + i * kTile, ldy);
      break;
    default:
      break;
  }
  _tile_release();
}

void gemv_bf16(const uint16_t* xp, int64_t T, const uint16_t* w, int64_t cols, int64_t r0,
               int64_t nr, float* y, int64_t ldy) {
  __asm__ volatile("" ::: "memory");  // tileloadd's asm does not say it reads memory
  const uint16_t* rows = w + r0 * cols;
  float* out = y + r0;
  const int64_t full = nr / kTile, tail = nr % kTile;
  if (full > 0) {
    configure(kTile);
    int64_t i = 0;
    if (T <= kTile) {  // one token tile: a weight sweep, 16 rows at a time (fewer streams)
      for (; i < full; ++i)
        tiles<1>(xp, T, rows + i * kTile * cols, cols, kTile, out + i * kTile, ldy);
    }
    for (; i + 4 <= full; i += 4)
      tiles<4>(xp, T, rows + i * kTile * cols, cols, kTile, out + i * kTile, ldy);
    switch (full - i) {
      case 3:
        tiles<3>(xp, T, rows + i * kTile * cols, cols, kTile, out + i * kTile, ldy);
        break;
      case 2:
        tiles<2>(xp, T, rows + i * kTile * cols, cols, kTile, out + i * kTile, ldy);
        break;
      case 1:
        tiles<1>(xp, T, rows + i * kTile * cols, cols, kTile, out + i * kTile, ldy);
        break;
      default:
        break;
    }
  }
  if (tail > 0) {  // fewer rows in the tiles: no load past the matrix
    configure(static_cast<int>(tail));
    tiles<1>(xp, T, rows + full * kTile * cols, cols, tail, out + full * kTile, ldy);
  }
  _tile_release();
}

}  // namespace k3::amx
