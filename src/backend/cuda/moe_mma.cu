// The routed MXFP4 experts of a decode step on the tensor cores (moe_mma.h says what is
// carried how). One block per (expert, 32 weight rows, window of 8·NT slot columns); a warp
// owns 2 m-tiles of 16 rows and walks the columns 128 at a time: lane (g, t) reads one whole
// 32-value group (16 packed bytes, one scale) of rows g and g+8 of each m-tile per chunk,
// decodes it into bf16 A fragments and runs mma.sync m16n8k16 against the parts of up to
// 8·NT slot columns. Each weight byte is read once per window: once per step at batch 1, and
// at larger batches every token of an expert shares one read (up to 8·NT / 3 slots a window).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/moe_mma.h"
#include "backend/cuda/runtime.cuh"

namespace k3::cuda {
namespace {

// One warp per block: a decode step's matrices make few blocks (16 experts × 24-28 row tiles),
// and with 4-warp blocks the down projection ran 1.1 waves; warps are scheduled one by one.
constexpr int kWarps = 1;
constexpr int kMinBlocks = 12;  // per SM: caps the registers at 168

// Where column q (0 … 31) of a group sits in the stored parts: the decoder pairs nibble n of
// each 8-nibble word with nibble n + 4 (one bf16x2 register), so pair m = 4i + n holds columns
// (8i + n, 8i + n + 4) of the group, stored next to each other.
__device__ inline int64_t stored_col(int64_t col) {
  const int q = static_cast<int>(col & 31), i = q >> 3, n = q & 7;
  return (col & ~int64_t{31}) + 8 * i + 2 * (n & 3) + (n >> 2);
}

// dst rows 3s, 3s+1, 3s+2 of width C: v = hi + mid + lo (the linear GEMM's split).
__device__ inline void store_parts(float v, __nv_bfloat16* dst, int64_t s, int64_t C, int64_t col) {
  const int64_t c = stored_col(col);
  const __nv_bfloat16 hi = __float2bfloat16_rn(v);
  const float r1 = v - __bfloat162float(hi);
  const __nv_bfloat16 mid = __float2bfloat16_rn(r1);
  dst[3 * s * C + c] = hi;
  dst[(3 * s + 1) * C + c] = mid;
  dst[(3 * s + 2) * C + c] = __float2bfloat16_rn(r1 - __bfloat162float(mid));
}

__device__ inline float sum_parts(const float* y3, int64_t s, int64_t W, int64_t col) {
  return y3[3 * s * W + col] + (y3[(3 * s + 1) * W + col] + y3[(3 * s + 2) * W + col]);
}

__global__ void gather_split(const float* z, const int32_t* choice_of, int64_t N, int64_t k,
                             int64_t L, __nv_bfloat16* zs) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= N * L) return;
  const int64_t s = i / L, col = i % L;
  store_parts(z[(choice_of[s] / k) * L + col], zs, s, L, col);
}

__global__ void situ_split(const float* gate3, const float* up3, int64_t N, int64_t I, SituParams p,
                           __nv_bfloat16* hs) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= N * I) return;
  const int64_t s = i / I, col = i % I;
  const float g = sum_parts(gate3, s, I, col), u = sum_parts(up3, s, I, col);
  // The CPU's expression (multiplying by the inverse caps).
  const float h = p.beta * tanhf(g * (1.0f / p.beta)) / (1.0f + expf(-g)) *
                  (p.linear_beta * tanhf(u * (1.0f / p.linear_beta)));
  store_parts(h, hs, s, I, col);
}

// c [T, L]: c[t] = Σ_j weight[t, j] · y[slot_of[t*k + j]], from zero, in j order.
__global__ void combine3(const float* y3, const int32_t* slot_of, const float* weight, int64_t T,
                         int64_t k, int64_t L, float* c) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= T * L) return;
  const int64_t t = i / L, col = i % L;
  float acc = 0.0f;
#pragma unroll 4
  for (int64_t j = 0; j < k; ++j)
    acc += weight[t * k + j] * sum_parts(y3, slot_of[t * k + j], L, col);
  c[i] = acc;
}

// c [16x8 fp32] += a [16x16 bf16, row] · b [16x8 bf16, col]
__device__ inline void mma(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                           uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ inline uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// One packed word (8 nibbles, column n at bits 4n) -> 4 bf16x2: p[k] = (nibble k, nibble k+4).
// Magnitude bits (e1 e0 m) land on bf16 bits 8-6 and the sign on bit 15, so each half is
// E2M1 · 2^-126 (e = 0 gives the subnormal m · 2^-127, exactly that too); the group's scale
// factor then makes it E2M1 · 2^(s-127). Masking first keeps the two shifted copies that one
// multiply makes from overlapping (no carries).
__device__ inline void decode_word(uint32_t w, uint32_t (&p)[4]) {
  constexpr uint32_t kKeep = 0x81C081C0u;
  const uint32_t w2 = w >> 8;
  p[0] = ((w & 0x000F000Fu) * 0x1040u) & kKeep;  // << 6 (magnitude), << 12 (sign)
  p[1] = ((w & 0x00F000F0u) * 0x0104u) & kKeep;  // << 2, << 8
  p[2] = ((w2 & 0x000F000Fu) * 0x1040u) & kKeep;
  p[3] = ((w2 & 0x00F000F0u) * 0x0104u) & kKeep;
}

// The factors that turn E2M1 · 2^-126 into E2M1 · 2^(s-127): 2^(s-1) in one bf16 multiply
// while s <= 128; beyond that 2^126 and then 2^(s-127) (s = 255 gives inf, as on the CPU).
__device__ inline void scale_factors(uint32_t s, uint32_t& f1, uint32_t& f2) {
  const uint32_t a = s <= 128 ? (s + 126) << 7 : 253u << 7;
  const uint32_t b = s <= 128 ? 0x3F80u : s << 7;
  f1 = a | (a << 16);
  f2 = b | (b << 16);
}

template <int kMT, int NT>  // kMT m-tiles (16 rows) per warp, NT n-tiles (8 columns) a window
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    mxfp4_mma(const __nv_bfloat16* xs, const int32_t* offsets, const int32_t* active,
              const int32_t* n_active, const Mxfp4Expert* experts, int which0, int tiles_per_mat,
              int n_windows, int64_t R, int64_t C, int64_t N3, float* y0, float* y1) {
  if (static_cast<int>(blockIdx.y) >= *n_active) return;
  const int e = active[blockIdx.y];
  const int win0 = static_cast<int>(blockIdx.x) % n_windows;
  const int tile = static_cast<int>(blockIdx.x) / n_windows;
  const int which = tile / tiles_per_mat, rt = tile % tiles_per_mat;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int64_t row0 = (int64_t{rt} * kWarps + warp) * (kMT * 16);
  if (row0 >= R) return;  // the whole warp
  const int64_t begin = offsets[e], ncols = 3 * (offsets[e + 1] - begin);
  const uint8_t* packed = experts[e].data[which0 + which];
  const uint8_t* scales = experts[e].scales[which0 + which];
  float* y = which != 0 ? y1 : y0;
  const int64_t groups = C / 32, nchunks = (groups + 3) / 4;
  const uint8_t* prow[kMT][2];
  const uint8_t* srow[kMT][2];
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = min(row0 + mi * 16 + g + 8 * h, R - 1);
      prow[mi][h] = packed + r * (C / 2);
      srow[mi][h] = scales + r * groups;
    }
  }
  for (int64_t win = win0; win * NT * 8 < ncols; win += n_windows) {
    const int64_t col0 = win * NT * 8;
    const __nv_bfloat16* brow[NT];
    bool bcol[NT];  // this lane's column holds a slot part of the expert (others stay zero)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni) {
      const int64_t col = col0 + ni * 8 + g;
      bcol[ni] = col < ncols;
      brow[ni] = xs + min(begin * 3 + col, N3 - 1) * C;
    }
    float acc[kMT][NT][4] = {};
    // Weights two chunks ahead (128 bytes a lane in flight): one chunk ahead left the
    // decode-step kernel at 42% of the copy bandwidth.
    uint4 a_n1[kMT][2], a_n2[kMT][2];
    uint32_t s_n1[kMT][2], s_n2[kMT][2];
    auto load_a = [&](int64_t c, uint4(&a)[kMT][2], uint32_t(&sc)[kMT][2]) {
      const int64_t G = 4 * c + t;
      const bool ok = c < nchunks && G < groups;
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          a[mi][h] = ok ? __ldg(reinterpret_cast<const uint4*>(prow[mi][h] + G * 16))
                        : make_uint4(0, 0, 0, 0);
          sc[mi][h] = ok ? srow[mi][h][G] : 127u;
        }
      }
    };
    load_a(0, a_n1, s_n1);
    load_a(1, a_n2, s_n2);
    for (int64_t c = 0; c < nchunks; ++c) {
      uint4 a[kMT][2];
      uint32_t f1[kMT][2], f2[kMT][2];
      bool big = false;
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          a[mi][h] = a_n1[mi][h];
          a_n1[mi][h] = a_n2[mi][h];
          scale_factors(s_n1[mi][h], f1[mi][h], f2[mi][h]);
          big |= s_n1[mi][h] > 128;
          s_n1[mi][h] = s_n2[mi][h];
        }
      }
      load_a(c + 2, a_n2, s_n2);  // in flight while this chunk computes
      big = __any_sync(0xffffffffu, big);
      const int64_t G = 4 * c + t;
      const bool ok = G < groups;
#pragma unroll
      for (int v = 0; v < 4; ++v) {  // word v of each group: mma steps 2v, 2v+1
        uint4 b[NT];
#pragma unroll
        for (int ni = 0; ni < NT; ++ni) {
          b[ni] = ok && bcol[ni] ? *reinterpret_cast<const uint4*>(brow[ni] + G * 32 + v * 8)
                                 : make_uint4(0, 0, 0, 0);
        }
        uint32_t p[kMT][2][4];
#pragma unroll
        for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t w = v == 0   ? a[mi][h].x
                               : v == 1 ? a[mi][h].y
                               : v == 2 ? a[mi][h].z
                                        : a[mi][h].w;
            decode_word(w, p[mi][h]);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              p[mi][h][q] = mul_bf16x2(p[mi][h][q], f1[mi][h]);
              if (big) p[mi][h][q] = mul_bf16x2(p[mi][h][q], f2[mi][h]);
            }
          }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int k0 = 2 * half, k1 = k0 + 1;
#pragma unroll
          for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
            for (int ni = 0; ni < NT; ++ni) {
              mma(acc[mi][ni], p[mi][0][k0], p[mi][1][k0], p[mi][0][k1], p[mi][1][k1],
                  half == 0 ? b[ni].x : b[ni].z, half == 0 ? b[ni].y : b[ni].w);
            }
          }
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NT; ++ni) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t r = row0 + mi * 16 + g + 8 * h;
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int64_t col = col0 + ni * 8 + 2 * t + i;
            if (r < R && col < ncols) y[(begin * 3 + col) * R + r] = acc[mi][ni][2 * h + i];
          }
        }
      }
    }
  }
}

// --- The pipelined kernel: weights through a shared-memory ring filled by cp.async. ---

// Blocks per SM for the pipelined kernel: 16 caps the registers at 128 (16 warps an SM); four
// n-tiles need 12 (168 registers; at 128 they spilled).
template <int NT>
constexpr int pipe_min_blocks() {
  return NT >= 4 ? 12 : 16;
}

__device__ inline void cp_async16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ inline void cp_async4(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Bytes of a row of staged scales: whole words, an odd number of them, so that the 8 rows a
// warp reads at once fall in 8 different banks.
__host__ __device__ inline int64_t scale_stride(int64_t groups) { return ((groups + 3) / 4 | 1) * 4; }

template <int kMT>
constexpr int ring_bytes(int stages) {
  return stages * kMT * 2 * 32 * 16;
}

// The same products as mxfp4_mma (and the same block/warp/lane ownership), but the weights reach
// the lanes through a kStages-deep ring in shared memory filled by cp.async (kStages - 1 chunks,
// 2 KB each, in flight per warp without holding registers), and the warp's scales are staged in
// shared memory once per block. Each lane copies and reads back only its own ring slots, so the
// ring needs no barrier; the scales (written by every lane) need one __syncwarp.
template <int kMT, int NT, int kStages>
__global__ void __launch_bounds__(32, pipe_min_blocks<NT>())
    mxfp4_mma_pipe(const __nv_bfloat16* xs, const int32_t* offsets, const int32_t* active,
                   const int32_t* n_active, const Mxfp4Expert* experts, int which0,
                   int tiles_per_mat, int n_windows, int64_t R, int64_t C, int64_t N3, float* y0,
                   float* y1) {
  extern __shared__ uint4 smem[];
  if (static_cast<int>(blockIdx.y) >= *n_active) return;
  const int e = active[blockIdx.y];
  const int win0 = static_cast<int>(blockIdx.x) % n_windows;
  const int tile = static_cast<int>(blockIdx.x) / n_windows;
  const int which = tile / tiles_per_mat, rt = tile % tiles_per_mat;
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  constexpr int kRows = kMT * 16;
  const int64_t row0 = int64_t{rt} * kRows;
  if (row0 >= R) return;
  const int64_t begin = offsets[e], ncols = 3 * (offsets[e + 1] - begin);
  if (win0 * NT * 8 >= ncols) return;  // no window of this block (before any copy starts)
  const uint8_t* packed = experts[e].data[which0 + which];
  const uint8_t* scales = experts[e].scales[which0 + which];
  float* y = which != 0 ? y1 : y0;
  const int64_t groups = C / 32, sstride = scale_stride(groups);
  const int nchunks = static_cast<int>((groups + 3) / 4);
  uint4* ring = smem;  // [kStages][kMT][2][32 lanes]
  uint8_t* sc = reinterpret_cast<uint8_t*>(smem) + ring_bytes<kMT>(kStages);  // [kRows][sstride]

  // The scales of the warp's rows: whole words by cp.async when they can (landing with chunk
  // 0, which the first wait below covers), else bytes through registers.
  if (groups % 4 == 0 && reinterpret_cast<uintptr_t>(scales) % 4 == 0) {
    for (int rl = 0; rl < kRows; ++rl) {
      const uint8_t* src = scales + (row0 + rl) * groups;
      for (int64_t w = lane; w < groups / 4; w += 32) cp_async4(sc + rl * sstride + 4 * w, src + 4 * w);
    }
  } else {
    for (int rl = 0; rl < kRows; ++rl) {
      const uint8_t* src = scales + (row0 + rl) * groups;
      for (int64_t gi = lane; gi < groups; gi += 32) sc[rl * sstride + gi] = __ldg(src + gi);
    }
  }
  cp_async_commit();
  // This lane's rows row0 + g + 8j (j = 2mi + h; all < R, R being a multiple of 32): weights
  // from prow + j·rstep, scales at srow + j·8·sstride in sc.
  const uint8_t* prow = packed + (row0 + g) * (C / 2);
  const int64_t rstep = 8 * (C / 2);
  const int srow = g * static_cast<int>(sstride), sstep = 8 * static_cast<int>(sstride);
  // Chunk c's copies of this lane into ring stage c % kStages (then one commit, empty or not).
  auto issue = [&](int c) {
    const int64_t G = 4 * int64_t{c} + t;
    if (c < nchunks && G < groups) {
      uint4* dst = ring + (c % kStages) * (kMT * 2 * 32) + lane;
      const uint8_t* src = prow + G * 16;
#pragma unroll
      for (int j = 0; j < 2 * kMT; ++j) cp_async16(dst + j * 32, src + j * rstep);
    }
    cp_async_commit();
  };
  for (int64_t win = win0; win * NT * 8 < ncols; win += n_windows) {
    const int64_t col0 = win * NT * 8;
    const __nv_bfloat16* brow[NT];
    bool bcol[NT];  // this lane's column holds a slot part of the expert (others stay zero)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni) {
      const int64_t col = col0 + ni * 8 + g;
      bcol[ni] = col < ncols;
      brow[ni] = xs + min(begin * 3 + col, N3 - 1) * C;
    }
    float acc[kMT][NT][4] = {};
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) issue(st);
    for (int c = 0; c < nchunks; ++c) {
      issue(c + kStages - 1);
      cp_async_wait<kStages - 1>();  // this lane's copies of chunk c (and the scales) have landed
      if (c == 0) __syncwarp();      // and every lane's scales
      const int64_t G = 4 * int64_t{c} + t;
      const bool ok = G < groups;
      const uint4* src = ring + (c % kStages) * (kMT * 2 * 32) + lane;
      uint4 a[kMT][2];
      uint32_t f1[kMT][2], s[kMT][2];
      uint32_t smax = 0;
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          a[mi][h] = src[(mi * 2 + h) * 32];
          // Off the matrix (G >= groups): any finite decode, times zero B parts.
          s[mi][h] = ok ? sc[srow + (mi * 2 + h) * sstep + G] : 127u;
          smax = max(smax, s[mi][h]);
          // 2^(s-1) in both halves, (s + 126) << 7, for s <= 128; past that 2^127 here and
          // the rest in a second multiply below.
          f1[mi][h] = min(s[mi][h], 128u) * 0x00800080u + 0x3F003F00u;
        }
      }
      const bool big = __any_sync(0xffffffffu, smax > 128);
#pragma unroll
      for (int v = 0; v < 4; ++v) {  // word v of each group: mma steps 2v, 2v+1
        uint4 b[NT];
#pragma unroll
        for (int ni = 0; ni < NT; ++ni) {
          b[ni] = ok && bcol[ni] ? *reinterpret_cast<const uint4*>(brow[ni] + G * 32 + v * 8)
                                 : make_uint4(0, 0, 0, 0);
        }
        uint32_t p[kMT][2][4];
#pragma unroll
        for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t w = v == 0   ? a[mi][h].x
                               : v == 1 ? a[mi][h].y
                               : v == 2 ? a[mi][h].z
                                        : a[mi][h].w;
            decode_word(w, p[mi][h]);
#pragma unroll
            for (int q = 0; q < 4; ++q) p[mi][h][q] = mul_bf16x2(p[mi][h][q], f1[mi][h]);
            if (big) {  // 2^(s-128) (s = 255: inf, as on the CPU); 1 for s <= 128
              const uint32_t sv = s[mi][h];
              const uint32_t x = (sv > 128 ? (sv == 255 ? 255u : sv - 1) : 127u) * 0x00800080u;
#pragma unroll
              for (int q = 0; q < 4; ++q) p[mi][h][q] = mul_bf16x2(p[mi][h][q], x);
            }
          }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int k0 = 2 * half, k1 = k0 + 1;
#pragma unroll
          for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
            for (int ni = 0; ni < NT; ++ni) {
              mma(acc[mi][ni], p[mi][0][k0], p[mi][1][k0], p[mi][0][k1], p[mi][1][k1],
                  half == 0 ? b[ni].x : b[ni].z, half == 0 ? b[ni].y : b[ni].w);
            }
          }
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NT; ++ni) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t r = row0 + mi * 16 + g + 8 * h;
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int64_t col = col0 + ni * 8 + 2 * t + i;
            if (col < ncols) y[(begin * 3 + col) * R + r] = acc[mi][ni][2 * h + i];
          }
        }
      }
    }
  }
}

template <int MT, int NT>
void launch_mma(const __nv_bfloat16* xs, const MoeGroups& grp, const Mxfp4Expert* experts,
                int which0, int n_which, int64_t R, int64_t C, int64_t N, int64_t T,
                float* const* y3) {
  const int tiles = blocks_for(R, kWarps * MT * 16);
  // Windows for the most columns an expert can have when a token picks it once; an expert
  // with more (repeated picks) loops over further windows in the same blocks.
  const int64_t most_cols = 3 * std::min(N, T);
  const int n_windows = std::max(1, blocks_for(most_cols, NT * 8));
  const dim3 grid(static_cast<unsigned>(int64_t{n_windows} * tiles * n_which),
                  static_cast<unsigned>(grp.max_active));
  mxfp4_mma<MT, NT><<<grid, kWarps * 32, 0, stream()>>>(xs, grp.offsets, grp.active, grp.n_active,
                                                        experts, which0, tiles, n_windows, R, C,
                                                        3 * N, y3[0], n_which > 1 ? y3[1] : y3[0]);
  check_launch("moe_experts (mxfp4 mma)");
}

template <int NT, int kStages>
void launch_pipe(const __nv_bfloat16* xs, const MoeGroups& grp, const Mxfp4Expert* experts,
                 int which0, int n_which, int64_t R, int64_t C, int64_t N, int n_windows,
                 float* const* y3) {
  constexpr int kMT = 2;
  const int tiles = blocks_for(R, kMT * 16);
  const size_t smem = ring_bytes<kMT>(kStages) + kMT * 16 * scale_stride(C / 32);
  auto* kernel = mxfp4_mma_pipe<kMT, NT, kStages>;
  if (smem > 48 * 1024) {  // wide rows: opt in to more shared memory
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "moe_experts (mxfp4 mma shared memory)");
  }
  const dim3 grid(static_cast<unsigned>(int64_t{n_windows} * tiles * n_which),
                  static_cast<unsigned>(grp.max_active));
  kernel<<<grid, 32, smem, stream()>>>(xs, grp.offsets, grp.active, grp.n_active, experts, which0,
                                       tiles, n_windows, R, C, 3 * N, y3[0],
                                       n_which > 1 ? y3[1] : y3[0]);
  check_launch("moe_experts (mxfp4 mma)");
}

// Experiment knob, read at every call (K3_MOE_MMA=old: the register-prefetch kernel with the
// old window count; s8: an 8-stage ring; default s4).
const char* mma_variant() {
  const char* v = std::getenv("K3_MOE_MMA");
  return v != nullptr ? v : "s4";
}
bool use_old_kernel() { return std::strcmp(mma_variant(), "old") == 0; }
int ring_stages() { return std::strcmp(mma_variant(), "s8") == 0 ? 8 : 4; }

template <int NT>
void launch_pipe_stages(const __nv_bfloat16* xs, const MoeGroups& grp,
                        const Mxfp4Expert* experts, int which0, int n_which, int64_t R, int64_t C,
                        int64_t N, int n_windows, float* const* y3) {
  if (ring_stages() == 8) {
    launch_pipe<NT, 8>(xs, grp, experts, which0, n_which, R, C, N, n_windows, y3);
  } else {
    launch_pipe<NT, 4>(xs, grp, experts, which0, n_which, R, C, N, n_windows, y3);
  }
}

}  // namespace

void moe_gather_split(const float* z, const int32_t* choice_of, int64_t N, int64_t k, int64_t L,
                      __nv_bfloat16* zs) {
  gather_split<<<blocks_for(N * L, 256), 256, 0, stream()>>>(z, choice_of, N, k, L, zs);
  check_launch("moe_experts (gather + split)");
}

void moe_mxfp4_mma(const __nv_bfloat16* xs, const MoeGroups& g, const Mxfp4Expert* experts,
                   int which0, int n_which, int64_t R, int64_t C, int64_t N, int64_t T,
                   float* const* y3) {
  check(C % 32 == 0 && R % 32 == 0 && n_which >= 1 && n_which <= 2, "moe_mxfp4_mma: bad shape");
  if (use_old_kernel()) {
    // Slot columns per window for the average expert of the step (3 per slot).
    const int64_t per_expert =
        3 * ((N + g.max_active - 1) / std::max<int64_t>(g.max_active, 1));
    if (per_expert <= 8) {
      launch_mma<2, 1>(xs, g, experts, which0, n_which, R, C, N, T, y3);
    } else if (per_expert <= 16) {
      launch_mma<2, 2>(xs, g, experts, which0, n_which, R, C, N, T, y3);
    } else {
      launch_mma<2, 4>(xs, g, experts, which0, n_which, R, C, N, T, y3);
    }
    return;
  }
  // Windows of 8·NT slot columns (3 a slot) and a grid of windows for 1.5 times the step's
  // average slots an expert: most experts fit in one window and decode each weight once; one
  // with more loops over further windows in its blocks. (Sizing the grid by the most columns
  // an expert could have, 3·min(N, T), left 23 of 24 windows idle with 896 experts at 64
  // tokens, where an expert has one or two slots.)
  const int64_t avg = (N + g.max_active - 1) / std::max<int64_t>(g.max_active, 1);
  const int64_t cover = (9 * avg + 1) / 2;
  const int nt = cover <= 8 ? 1 : cover <= 16 ? 2 : 4;
  const int64_t most = 3 * std::min(N, T);
  const int n_windows = static_cast<int>(std::max<int64_t>(
      1, (std::min(cover, most) + 8 * nt - 1) / (8 * nt)));
  if (nt == 1) {
    launch_pipe_stages<1>(xs, g, experts, which0, n_which, R, C, N, n_windows, y3);
  } else if (nt == 2) {
    launch_pipe_stages<2>(xs, g, experts, which0, n_which, R, C, N, n_windows, y3);
  } else {
    launch_pipe_stages<4>(xs, g, experts, which0, n_which, R, C, N, n_windows, y3);
  }
}

void moe_situ_split(const float* gate3, const float* up3, int64_t N, int64_t I, SituParams p,
                    __nv_bfloat16* hs) {
  situ_split<<<blocks_for(N * I, 256), 256, 0, stream()>>>(gate3, up3, N, I, p, hs);
  check_launch("moe_experts (situ + split)");
}

void moe_combine3(const float* y3, const int32_t* slot_of, const float* weight, int64_t T,
                  int64_t k, int64_t L, float* c) {
  combine3<<<blocks_for(T * L, 256), 256, 0, stream()>>>(y3, slot_of, weight, T, k, L, c);
  check_launch("moe_experts (combine)");
}

}  // namespace k3::cuda
