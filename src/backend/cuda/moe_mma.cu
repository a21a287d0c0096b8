// The routed MXFP4 experts of a decode step on the tensor cores (moe_mma.h says what is
// carried how). One one-warp block per (expert, 32 weight rows, window of 8·NT slot columns);
// the warp owns 2 m-tiles of 16 rows and walks the columns 128 at a time: lane (g, t) gets one
// whole 32-value group (16 packed bytes, one scale) of rows g and g+8 of each m-tile per chunk
// through a cp.async ring in shared memory, decodes it into bf16 A fragments and runs
// mma.sync m16n8k16 against the parts of up to 8·NT slot columns. Each weight byte is read
// once per window: once per step at batch 1, and at larger batches every token of an expert
// shares one read (the window is sized to the step's slots an expert).
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/moe_mma.h"
#include "backend/cuda/runtime.cuh"

namespace k3::cuda {
namespace {

// Ring stages: 4 (three 2 KB chunks in flight a warp, 12 KB of shared memory a block with the
// scales, 16 warps an SM). 8 stages (fewer blocks an SM by shared memory) ran 1.2x slower.
constexpr int kStages = 4;

// Where column q (0 … 31) of a group sits in the stored parts: the decoder pairs nibble n of
// each 8-nibble word with nibble n + 4 (one bf16x2 register), so pair m = 4i + n holds columns
// (8i + n, 8i + n + 4) of the group, stored next to each other.
__device__ inline int64_t stored_col(int64_t col) {
  const int q = static_cast<int>(col & 31), i = q >> 3, n = q & 7;
  return (col & ~int64_t{31}) + 8 * i + 2 * (n & 3) + (n >> 2);
}

// dst rows P·s … P·s + P - 1 of width C: v = hi + mid + lo (P = 3, the linear GEMM's split)
// or v rounded to bf16 (P = 1).
__device__ inline void store_parts(float v, int P, __nv_bfloat16* dst, int64_t s, int64_t C,
                                   int64_t col) {
  const int64_t c = stored_col(col);
  const __nv_bfloat16 hi = __float2bfloat16_rn(v);
  if (P == 1) {
    dst[s * C + c] = hi;
    return;
  }
  const float r1 = v - __bfloat162float(hi);
  const __nv_bfloat16 mid = __float2bfloat16_rn(r1);
  dst[3 * s * C + c] = hi;
  dst[(3 * s + 1) * C + c] = mid;
  dst[(3 * s + 2) * C + c] = __float2bfloat16_rn(r1 - __bfloat162float(mid));
}

__device__ inline float sum_parts(const float* y, int P, int64_t s, int64_t W, int64_t col) {
  if (P == 1) return y[s * W + col];
  return y[3 * s * W + col] + (y[(3 * s + 1) * W + col] + y[(3 * s + 2) * W + col]);
}

__global__ void gather_split(const float* z, const int32_t* choice_of, int64_t N, int64_t k,
                             int64_t L, int P, __nv_bfloat16* zs) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= N * L) return;
  const int64_t s = i / L, col = i % L;
  store_parts(z[(choice_of[s] / k) * L + col], P, zs, s, L, col);
}

__global__ void situ_split(const float* gate3, const float* up3, int64_t N, int64_t I, int P,
                           SituParams p, __nv_bfloat16* hs) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= N * I) return;
  const int64_t s = i / I, col = i % I;
  const float g = sum_parts(gate3, P, s, I, col), u = sum_parts(up3, P, s, I, col);
  // The CPU's expression (multiplying by the inverse caps).
  const float h = p.beta * tanhf(g * (1.0f / p.beta)) / (1.0f + expf(-g)) *
                  (p.linear_beta * tanhf(u * (1.0f / p.linear_beta)));
  store_parts(h, P, hs, s, I, col);
}

// c [T, L]: c[t] = Σ_j weight[t, j] · y[slot_of[t*k + j]], from zero, in j order.
__global__ void combine3(const float* y3, int P, const int32_t* slot_of, const float* weight,
                         int64_t T, int64_t k, int64_t L, float* c) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= T * L) return;
  const int64_t t = i / L, col = i % L;
  float acc = 0.0f;
#pragma unroll 4
  for (int64_t j = 0; j < k; ++j)
    acc += weight[t * k + j] * sum_parts(y3, P, slot_of[t * k + j], L, col);
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

// Blocks per SM for the pipelined kernel: 16 caps the registers at 128 (16 warps an SM); four
// n-tiles need 12 (168 registers; at 128 they spilled).
template <int NT>
constexpr int pipe_min_blocks() {
  return NT >= 4 ? 12 : 16;
}

// kL2: bytes the L2 fetches from DRAM around the copy (0: its default, or 256). A warp copies
// 64 bytes of each of its 32 rows per chunk, rows 1792 bytes apart at the slice's width: DRAM
// saw short, scattered reads (45% of its peak at batch 1) until the L2 fetched each row's next
// three chunks with this one (E=896, 64 tokens: 4.85 -> 4.25 ms).
template <int kL2>
__device__ inline void cp_async16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if constexpr (kL2 == 256) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
  }
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
__host__ __device__ inline int64_t scale_stride(int64_t groups) {
  return ((groups + 3) / 4 | 1) * 4;
}

template <int kMT>
constexpr int ring_bytes(int stages) {
  return stages * kMT * 2 * 32 * 16;
}

// y rows (slot parts) of one expert's 32 weight rows over the block's windows. The weights reach
// the lanes through a kStages-deep ring in shared memory filled by cp.async (kStages - 1 chunks,
// 2 KB each, in flight per warp without holding registers: prefetching two chunks into
// registers instead took 166 registers, 12 warps an SM, and ran 2.5x slower at 64 tokens with
// 896 experts), and the warp's scales are staged in shared memory once per block. Each lane
// copies and reads back only its own ring slots, so the ring needs no barrier; the scales
// (written by every lane) need one __syncwarp. (Splitting the columns over 2-4 blocks, partial
// sums added by the next kernel, to fill the GPU at batch 1 ran 1.2x slower there.)
template <int kMT, int NT, int kStages, int kL2, bool kPrefB, int kMinBlocks>
__global__ void __launch_bounds__(32, kMinBlocks)
    mxfp4_mma(const __nv_bfloat16* xs, int P, const int32_t* offsets, const int32_t* active,
              const int32_t* n_active, const Mxfp4Expert* experts, int which0, int tiles_per_mat,
              int n_windows, int64_t R, int64_t C, int64_t NP, float* y0, float* y1) {
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
  const int64_t begin = offsets[e], ncols = P * (offsets[e + 1] - begin);
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
      for (int64_t w = lane; w < groups / 4; w += 32)
        cp_async4(sc + rl * sstride + 4 * w, src + 4 * w);
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
      for (int j = 0; j < 2 * kMT; ++j) cp_async16<kL2>(dst + j * 32, src + j * rstep);
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
      brow[ni] = xs + min(begin * P + col, NP - 1) * C;
    }
    float acc[kMT][NT][4] = {};
    // Word v of this lane's B part of column tile ni in group G (zero off the matrix or the
    // expert's columns); the baseline (kL2 == 0) kept its plain load.
    auto b_word = [&](int ni, int64_t G, int v) {
      if (G >= groups || !bcol[ni]) return make_uint4(0, 0, 0, 0);
      const uint4* bp = reinterpret_cast<const uint4*>(brow[ni] + G * 32 + v * 8);
      return kL2 == 0 ? *bp : __ldg(bp);
    };
    // kPrefB: this lane's B words of chunk c + 1 are loaded while chunk c runs (their L2
    // latency stalled the warp at every chunk otherwise).
    uint4 bnext[kPrefB ? NT : 1][4];
    auto load_b = [&](int c) {
#pragma unroll
      for (int ni = 0; ni < (kPrefB ? NT : 1); ++ni) {
#pragma unroll
        for (int v = 0; v < 4; ++v)
          bnext[ni][v] = c < nchunks ? b_word(ni, 4 * int64_t{c} + t, v) : make_uint4(0, 0, 0, 0);
      }
    };
    if constexpr (kPrefB) load_b(0);
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) issue(st);
    for (int c = 0; c < nchunks; ++c) {
      uint4 bcur[kPrefB ? NT : 1][4];
      if constexpr (kPrefB) {
#pragma unroll
        for (int ni = 0; ni < NT; ++ni)
#pragma unroll
          for (int v = 0; v < 4; ++v) bcur[ni][v] = bnext[ni][v];
        load_b(c + 1);
      }
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
          if constexpr (kPrefB) {
            b[ni] = bcur[ni][v];
          } else {
            b[ni] = b_word(ni, G, v);
          }
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
            if (col < ncols) y[(begin * P + col) * R + r] = acc[mi][ni][2 * h + i];
          }
        }
      }
    }
  }
}

template <int NT, int kStages, int kMT, int kL2, bool kPrefB = false,
          int kMinBlocks = pipe_min_blocks<NT>()>
void launch_kernel(const __nv_bfloat16* xs, int P, const MoeGroups& grp, const Mxfp4Expert* experts,
                   int which0, int n_which, int64_t R, int64_t C, int64_t N, int n_windows,
                   float* const* y3) {
  const int tiles = blocks_for(R, kMT * 16);
  const size_t smem = ring_bytes<kMT>(kStages) + kMT * 16 * scale_stride(C / 32);
  auto* kernel = mxfp4_mma<kMT, NT, kStages, kL2, kPrefB, kMinBlocks>;
  if (smem > 48 * 1024) {  // wide rows: opt in to more shared memory
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "moe_experts (mxfp4 mma shared memory)");
  }
  const dim3 grid(static_cast<unsigned>(int64_t{n_windows} * tiles * n_which),
                  static_cast<unsigned>(grp.max_active));
  cuda::launch(kernel, grid, 32, smem, xs, P, grp.offsets, grp.active, grp.n_active, experts,
               which0, tiles, n_windows, R, C, P * N, y3[0], n_which > 1 ? y3[1] : y3[0]);
  check_launch("moe_experts (mxfp4 mma)");
}

// K3_MOE_BASELINE=1: the kernel as it was before the L2 fetch size, the B words a chunk ahead
// and the 96-register cap (A/B runs against it on the device).
bool moe_baseline() {
  static const bool on = [] {
    const char* e = std::getenv("K3_MOE_BASELINE");
    return e != nullptr && std::atoi(e) == 1;
  }();
  return on;
}

// One-n-tile windows (batch-1 steps and the like) load their B words a chunk ahead and run
// under 96 registers (20 blocks an SM by registers, 18 by shared memory, against 16): their
// warps stalled on those L2 reads with too few others to switch to. Wider windows keep 128
// (their accumulators would spill).
template <int NT, int kStages, int kMT = 2>
void launch_mma(const __nv_bfloat16* xs, int P, const MoeGroups& grp, const Mxfp4Expert* experts,
                int which0, int n_which, int64_t R, int64_t C, int64_t N, int n_windows,
                float* const* y3) {
  if (moe_baseline()) {
    launch_kernel<NT, kStages, kMT, 0>(xs, P, grp, experts, which0, n_which, R, C, N, n_windows,
                                       y3);
  } else if constexpr (NT == 1) {
    launch_kernel<NT, kStages, kMT, 256, true, 20>(xs, P, grp, experts, which0, n_which, R, C, N,
                                                   n_windows, y3);
  } else {
    launch_kernel<NT, kStages, kMT, 256>(xs, P, grp, experts, which0, n_which, R, C, N, n_windows,
                                         y3);
  }
}

}  // namespace

void moe_gather_split(const float* z, const int32_t* choice_of, int64_t N, int64_t k, int64_t L,
                      int P, __nv_bfloat16* zs) {
  cuda::launch(gather_split, blocks_for(N * L, 256), 256, 0, z, choice_of, N, k, L, P, zs);
  check_launch("moe_experts (gather + split)");
}

void moe_mxfp4_mma(const __nv_bfloat16* xs, int P, const MoeGroups& g, const Mxfp4Expert* experts,
                   int which0, int n_which, int64_t R, int64_t C, int64_t N, int64_t T,
                   float* const* y3) {
  check(C % 32 == 0 && R % 32 == 0 && n_which >= 1 && n_which <= 2 && (P == 1 || P == 3),
        "moe_mxfp4_mma: bad shape");
  // Windows of 8·NT slot columns (P a slot) and a grid of windows for 1.5 times the step's
  // average slots an expert: most experts fit in one window and decode each weight once; one
  // with more loops over further windows in its blocks. (Sizing the grid by the most columns
  // an expert could have, P·min(N, T), left 23 of 24 windows idle with 896 experts at 64
  // tokens, where an expert has one or two slots.)
  const int64_t avg = (N + g.max_active - 1) / std::max<int64_t>(g.max_active, 1);
  const int64_t cover = (3 * P * avg + 1) / 2;
  const int nt = cover <= 8 ? 1 : cover <= 16 ? 2 : 4;
  const int64_t most = P * std::min(N, T);
  const int n_windows =
      static_cast<int>(std::max<int64_t>(1, (std::min(cover, most) + 8 * nt - 1) / (8 * nt)));
  // K3_MOE_MT=1: one m-tile (16 weight rows) a warp for one n-tile, twice the warps (A/B runs
  // of the batch-1 kernel's wave count).
  static const bool one_mt = [] {
    const char* e = std::getenv("K3_MOE_MT");
    return e != nullptr && std::atoi(e) == 1;
  }();
  if (nt == 1 && one_mt) {
    launch_mma<1, kStages, 1>(xs, P, g, experts, which0, n_which, R, C, N, n_windows, y3);
  } else if (nt == 1) {
    launch_mma<1, kStages>(xs, P, g, experts, which0, n_which, R, C, N, n_windows, y3);
  } else if (nt == 2) {
    launch_mma<2, kStages>(xs, P, g, experts, which0, n_which, R, C, N, n_windows, y3);
  } else {
    launch_mma<4, kStages>(xs, P, g, experts, which0, n_which, R, C, N, n_windows, y3);
  }
}

void moe_situ_split(const float* gate3, const float* up3, int64_t N, int64_t I, int P, SituParams p,
                    __nv_bfloat16* hs) {
  cuda::launch(situ_split, blocks_for(N * I, 256), 256, 0, gate3, up3, N, I, P, p, hs);
  check_launch("moe_experts (situ + split)");
}

void moe_combine3(const float* y3, int P, const int32_t* slot_of, const float* weight, int64_t T,
                  int64_t k, int64_t L, float* c) {
  cuda::launch(combine3, blocks_for(T * L, 256), 256, 0, y3, P, slot_of, weight, T, k, L, c);
  check_launch("moe_experts (combine)");
}

}  // namespace k3::cuda
