// Grouped GEMMs of the routed MXFP4 experts for large steps (moe_gemm.h says what is carried
// how). One block computes a 128-weight-row × 128-slot tile of one expert on the Hopper
// warpgroup multiplier (wgmma): two warpgroups, each 64 weight rows × all the tile's slots,
// D = W · Xᵀ with both operands read from shared memory, 64 columns a step.
//   A (the weights): each thread loads 16 packed bytes (one 32-value group of one weight row)
//     one step ahead into registers, decodes them into bf16 (exact) and stores them to a
//     2-stage shared tile: every weight value is decoded once per tile.
//   B (the activations, bf16 parts): cp.async into a 3-stage ring.
//   Both tiles are K-major with the 128-byte swizzle that the wgmma descriptors describe.
// The slots are the multiply's N, rounded up to 16 per tile (an expert of 73 slots costs 80
// columns of tensor work, not 128). The gate/up launch interleaves 8-row groups of gate and
// up in its weight tile, so one thread's accumulator rows g and g + 8 are gate and up of the
// same column and it applies SiTU-GLU before storing h; the down launch stores fp32.
#include <algorithm>

#include "backend/cuda/moe_gemm.h"
#include "backend/cuda/runtime.cuh"
#include "backend/cuda/wgmma.cuh"
#include "backend/cuda/wgmma_ops.cuh"

namespace k3::cuda {
namespace {

constexpr int kBM = kGemmTileM;  // slots per tile
constexpr int kBN = 128;         // weight rows per tile (gate/up: 64 of each)
constexpr int kBK = 64;          // columns per step (two MXFP4 groups): one 128-byte row
constexpr int kThreads = 256;    // two warpgroups of 64 weight rows each
constexpr int kStagesA = 3;
constexpr int kTileElems = kBM * kBK;  // bf16 values in one A part or one B tile (16 KB)
static_assert(kBM == kBN && kThreads == 2 * kBN, "one thread decodes one group of a B row");

__device__ inline uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Element offset of (row, 16-byte chunk) in a [rows][kBK] bf16 tile, chunks XOR-swizzled by
// row: the 8 rows of one ldmatrix 8×8 matrix then sit in 8 different bank groups.
__device__ inline int swz(int row, int chunk) { return row * kBK + ((chunk ^ (row & 7)) << 3); }

// 16 bytes global -> shared; valid == false zero-fills (nothing is read).
__device__ inline void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ inline uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Scale code s -> the factors that turn E2M1 · 2^-126 into E2M1 · 2^(s-127): 2^(s-1) in one
// bf16 multiply while s <= 128 (2^(s-1) is then a normal bf16), else 2^126 then 2^(s-127).
// bf16 multiplies keep subnormals, so each step is exact wherever the result is representable.
__device__ inline void scale_factors(uint32_t s, uint32_t& f1, uint32_t& f2) {
  const uint32_t a = s <= 128 ? (s + 126) << 7 : 253u << 7;
  const uint32_t b = s <= 128 ? 0x3F80u : s << 7;
  f1 = a | (a << 16);
  f2 = b | (b << 16);
}

// One packed word (columns 0 … 7, column n at bits 4n) -> 4 bf16x2 of columns (0,1), (2,3),
// (4,5), (6,7). The multiply places a nibble's magnitude bits (e1 e0 m) on bf16 bits 8-6 and
// its sign on bit 15 of two halves at once (columns n and n+4; masked first so the shifted
// copies never overlap), which reads as E2M1 · 2^-126 (e = 0: the subnormal m · 2^-127); a
// byte permute pairs neighbouring columns, and the scale factors finish the value.
__device__ inline uint4 decode_word(uint32_t w, uint32_t f1, uint32_t f2, bool two) {
  constexpr uint32_t kKeep = 0x81C081C0u;
  const uint32_t w2 = w >> 8;
  const uint32_t p0 = ((w & 0x000F000Fu) * 0x1040u) & kKeep;   // columns 0, 4
  const uint32_t p1 = ((w & 0x00F000F0u) * 0x0104u) & kKeep;   // 1, 5
  const uint32_t p2 = ((w2 & 0x000F000Fu) * 0x1040u) & kKeep;  // 2, 6
  const uint32_t p3 = ((w2 & 0x00F000F0u) * 0x0104u) & kKeep;  // 3, 7
  uint32_t o[4] = {__byte_perm(p0, p1, 0x5410), __byte_perm(p2, p3, 0x5410),
                   __byte_perm(p0, p1, 0x7632), __byte_perm(p2, p3, 0x7632)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    o[i] = mul_bf16x2(o[i], f1);
    if (two) o[i] = mul_bf16x2(o[i], f2);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// v = hi + mid + lo (the linear GEMM's split); part p of v.
template <int kParts>
__device__ inline void split_parts(float v, __nv_bfloat16 (&out)[kParts]) {
  out[0] = __float2bfloat16_rn(v);
  if (kParts == 1) return;
  const float r1 = v - __bfloat162float(out[0]);
  out[1] = __float2bfloat16_rn(r1);
  out[kParts - 1] = __float2bfloat16_rn(r1 - __bfloat162float(out[1]));
}

__device__ inline uint32_t pack_bf16x2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return uint32_t{__bfloat16_as_ushort(lo)} | (uint32_t{__bfloat16_as_ushort(hi)} << 16);
}

__device__ inline float situ(float g, float u, SituParams p) {  // the CPU's expression
  return p.beta * tanhf(g * (1.0f / p.beta)) / (1.0f + expf(-g)) *
         (p.linear_beta * tanhf(u * (1.0f / p.linear_beta)));
}

__global__ void build_tiles(const int32_t* offsets, int E, MoeGemmTiles t) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  int32_t n = 0;
  for (int e = 0; e < E; ++e) {
    const int32_t end = offsets[e + 1];
    for (int32_t r = offsets[e]; r < end; r += kBM) {
      t.expert[n] = e;
      t.row0[n] = r;
      t.end[n] = end;
      ++n;
    }
  }
  *t.n = n;
}

// One thread per 8 columns of one slot.
template <int kParts>
__global__ void gather_parts(const float* z, const int32_t* choice_of, int64_t N, int64_t k,
                             int64_t L, __nv_bfloat16* xs) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, chunks = L / 8;
  if (i >= N * chunks) return;
  const int64_t s = i / chunks, c = (i % chunks) * 8;
  const float* src = z + (choice_of[s] / k) * L + c;
  uint32_t w[kParts][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    __nv_bfloat16 a[kParts], b[kParts];
    split_parts<kParts>(src[2 * j], a);
    split_parts<kParts>(src[2 * j + 1], b);
#pragma unroll
    for (int p = 0; p < kParts; ++p) w[p][j] = pack_bf16x2(a[p], b[p]);
  }
#pragma unroll
  for (int p = 0; p < kParts; ++p) {
    *reinterpret_cast<uint4*>(xs + (p * N + s) * L + c) =
        make_uint4(w[p][0], w[p][1], w[p][2], w[p][3]);
  }
}

// One step's multiplies of a warpgroup, committed as one group: w its 64 weight rows, x the
// step's activation parts [kParts][kBM][kBK], N the slots rounded up to 16.
template <int N, int kParts>
__device__ inline void step_multiplies(float (&acc)[64], const __nv_bfloat16* w,
                                       const __nv_bfloat16* x) {
  const uint64_t w_desc = wgmma_desc_sw128(w);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBK / 16; ++kk) {
#pragma unroll
    for (int p = 0; p < kParts; ++p) {
      const uint64_t x_desc = wgmma_desc_sw128(x + p * kTileElems);
      wgmma_m64k16<N>(acc, wgmma_desc_k16(w_desc, kk), wgmma_desc_k16(x_desc, kk));
    }
  }
  wgmma_commit();
}

struct GemmArgs {
  const __nv_bfloat16* xs;  // [P, N, C]
  MoeGemmTiles tiles;
  const MoeGemmExpert* experts;
  int64_t N, C, R;  // slots, columns, weight rows (gate/up: I; down: L)
  SituParams situ;
  __nv_bfloat16* hs;  // gate/up: [P, N, R]
  float* y;           // down: [N, R]
};

// One tile (blockIdx.x: weight rows; tile: slots of one expert); smem as in moe_gemm.
template <int kParts, bool kGateUp>
__device__ inline void gemm_tile(const GemmArgs& g, int tile, uint8_t* smem) {
  auto* As = reinterpret_cast<__nv_bfloat16*>(smem);        // [kStagesA][kParts][kBM][kBK]
  __nv_bfloat16* Bs = As + kStagesA * kParts * kTileElems;  // [2][kBN][kBK]
  const int e = g.tiles.expert[tile];
  const int64_t row0 = g.tiles.row0[tile];
  const int rows = static_cast<int>(min(int64_t{kBM}, g.tiles.end[tile] - row0));
  const int64_t C = g.C, R = g.R;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, wq = warp & 3;  // warpgroup (64 weight rows), warp in it
  const int n_pad = (rows + 15) & ~15;      // the multiply's N: slots rounded up to 16
  // A warpgroup whose 64 weight rows all lie past R (the last column tile) multiplies nothing.
  const bool wg_live = kGateUp ? blockIdx.x * int64_t{kBN / 2} + wg * 32 < R
                               : blockIdx.x * int64_t{kBN} + wg * 64 < R;

  // The B row this thread decodes (shared row b, group `half` of each step) and its source:
  // gate/up tiles hold 8-row groups j of gate (j even) and up (j odd) of the same 8 rows.
  const int b = tid >> 1, half = tid & 1;
  int which = 2;
  int64_t wrow = blockIdx.x * int64_t{kBN} + b;
  if (kGateUp) {
    which = (b >> 3) & 1;
    wrow = blockIdx.x * int64_t{kBN / 2} + (b >> 4) * 8 + (b & 7);
  }
  const bool wvalid = wrow < R;
  const uint8_t* wp = g.experts[e].data[which] + (wvalid ? wrow : 0) * (C / 2) + half * 16;
  const uint8_t* sp = g.experts[e].scales[which] + (wvalid ? wrow : 0) * (C / 32) + half;
  const int nk = static_cast<int>((C + kBK - 1) / kBK);

  uint4 pk = make_uint4(0, 0, 0, 0);
  uint32_t sc = 0;
  auto load_b = [&](int ks) {
    const int64_t k0 = int64_t{ks} * kBK;
    const bool v = wvalid && k0 + half * 32 < C;
    pk = v ? __ldg(reinterpret_cast<const uint4*>(wp + k0 / 2)) : make_uint4(0, 0, 0, 0);
    sc = v ? sp[k0 / 32] : 0u;
  };
  auto store_b = [&](int buf) {
    uint32_t f1, f2;
    scale_factors(sc, f1, f2);
    const bool two = sc > 128;
    __nv_bfloat16* dst = Bs + buf * kTileElems;
    const uint32_t w[4] = {pk.x, pk.y, pk.z, pk.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      *reinterpret_cast<uint4*>(dst + swz(b, half * 4 + q)) = decode_word(w[q], f1, f2, two);
    }
  };
  auto load_a = [&](int ks, int stage) {
    const int64_t k0 = int64_t{ks} * kBK;
#pragma unroll
    for (int i = tid; i < kBM * (kBK / 8); i += kThreads) {
      const int r = i >> 3, ch = i & 7;
      const bool v = r < rows && k0 + ch * 8 < C;
      const int64_t off = v ? (row0 + r) * C + k0 + ch * 8 : 0;
#pragma unroll
      for (int p = 0; p < kParts; ++p) {
        cp_async16(smem_addr(As + (stage * kParts + p) * kTileElems + swz(r, ch)),
                   g.xs + p * g.N * C + off, v);
      }
    }
  };

  float acc[64] = {};
  // D [64 weight rows, n_pad slots] += W [rows, 64 columns] · X [slots, 64 columns]ᵀ.
  auto issue = [&](int stage, int buf) {
    if (!wg_live) return;
    const __nv_bfloat16* w = Bs + buf * kTileElems + wg * 64 * kBK;
    const __nv_bfloat16* x = As + stage * kParts * kTileElems;
    switch (n_pad) {  // one straight run of multiplies per shape
      case 16:
        step_multiplies<16, kParts>(acc, w, x);
        break;
      case 32:
        step_multiplies<32, kParts>(acc, w, x);
        break;
      case 48:
        step_multiplies<48, kParts>(acc, w, x);
        break;
      case 64:
        step_multiplies<64, kParts>(acc, w, x);
        break;
      case 80:
        step_multiplies<80, kParts>(acc, w, x);
        break;
      case 96:
        step_multiplies<96, kParts>(acc, w, x);
        break;
      case 112:
        step_multiplies<112, kParts>(acc, w, x);
        break;
      default:
        step_multiplies<128, kParts>(acc, w, x);
        break;
    }
  };

  // Pipeline: X(ks) lands two steps ahead, W(ks + 1) is decoded while the multiplies of step
  // ks run and W(ks + 2)'s bytes are in flight; one barrier a step (every thread has waited
  // for its warpgroup's multiplies of step ks - 1, which read the buffers this step refills).
  load_b(0);
  store_b(0);
  if (nk > 1) load_b(1);
  load_a(0, 0);
  cp_async_commit();
  if (nk > 1) load_a(1, 1);
  cp_async_commit();
  for (int ks = 0; ks < nk; ++ks) {
    cp_async_wait<1>();
    fence_proxy_async();  // this thread's cp.async and decoded stores, for the multiplier
    __syncthreads();
    issue(ks % kStagesA, ks & 1);
    if (ks + 2 < nk) load_a(ks + 2, (ks + 2) % kStagesA);
    cp_async_commit();
    if (ks + 1 < nk) {
      store_b((ks + 1) & 1);
      if (ks + 2 < nk) load_b(ks + 2);
    }
    wgmma_wait<0>();
  }
  wgmma_pin(acc);
  if (!wg_live) return;

  // Epilogue: accumulator 4j + 2h + c is tile weight row wg·64 + wq·16 + lane/4 + 8h and slot
  // 8j + 2·(lane%4) + c. Gate/up: rows h = 0 and 1 are gate and up of the same column.
  const int lr = lane >> 2, t = lane & 3;  // accumulator row in the warp's 8, slot pair
#pragma unroll
  for (int j = 0; j < kBM / 8; ++j) {
    if (8 * j >= n_pad) break;  // uniform
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int r = 8 * j + 2 * t + c;
      if (r >= rows) continue;
      const int64_t slot = row0 + r;
      if (kGateUp) {
        const int64_t col = blockIdx.x * int64_t{kBN / 2} + (wg * 4 + wq) * 8 + lr;
        if (col >= R) continue;
        __nv_bfloat16 h[kParts];
        split_parts<kParts>(situ(acc[4 * j + c], acc[4 * j + 2 + c], g.situ), h);
#pragma unroll
        for (int p = 0; p < kParts; ++p) g.hs[(p * g.N + slot) * R + col] = h[p];
      } else {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int64_t col = blockIdx.x * int64_t{kBN} + wg * 64 + wq * 16 + lr + 8 * hh;
          if (col < R) g.y[slot * R + col] = acc[4 * j + 2 * hh + c];
        }
      }
    }
  }
}

// grid (weight-row tiles, min(max_tiles, 65535)): blockIdx.y strides over the step's tiles.
template <int kParts, bool kGateUp>
__global__ void __launch_bounds__(kThreads) moe_gemm(GemmArgs g) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  // The swizzled tiles want a 1024-byte aligned base (the launch adds the slack).
  const auto off = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023u;
  uint8_t* smem = smem_raw + ((1024u - off) & 1023u);
  const int n = *g.tiles.n;
  for (int tile = blockIdx.y; tile < n; tile += gridDim.y) {
    gemm_tile<kParts, kGateUp>(g, tile, smem);
    __syncthreads();  // the next tile's prologue overwrites the shared tiles
  }
}

template <int kParts, bool kGateUp>
void launch(const GemmArgs& a) {
  constexpr size_t kSmem =
      size_t{kStagesA * kParts + 2} * kTileElems * sizeof(__nv_bfloat16) + 1024;
  static bool configured = false;  // the attribute once per instantiation
  if (!configured) {
    check_cuda(
        cudaFuncSetAttribute(moe_gemm<kParts, kGateUp>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmem)),
        "moe_gemm (smem)");
    configured = true;
  }
  const int64_t per_tile = kGateUp ? kBN / 2 : kBN;
  const dim3 grid(static_cast<unsigned>((a.R + per_tile - 1) / per_tile),
                  static_cast<unsigned>(std::min<int64_t>(a.tiles.max_tiles, 65535)));
  cuda::launch(moe_gemm<kParts, kGateUp>, grid, kThreads, kSmem, a);
  check_launch(kGateUp ? "moe_experts (gemm gate/up)" : "moe_experts (gemm down)");
}

void check_shape(int parts, const MoeGemmTiles& t, int64_t C, int64_t R) {
  check(parts == 1 || parts == 3, "moe_gemm: parts must be 1 or 3");
  check(C > 0 && C % 32 == 0 && R > 0 && R % 2 == 0, "moe_gemm: bad widths ", C, ", ", R);
  check(t.max_tiles > 0, "moe_gemm: no tiles");
}

}  // namespace

int64_t moe_gemm_max_tiles(int64_t N, int64_t E) { return (N + kBM - 1) / kBM + std::min(E, N); }

void moe_gemm_tiles(const int32_t* offsets, int64_t E, const MoeGemmTiles& t) {
  cuda::launch(build_tiles, 1, 32, 0, offsets, static_cast<int>(E), t);
  check_launch("moe_experts (gemm tiles)");
}

void moe_gemm_gather(const float* z, const int32_t* choice_of, int64_t N, int64_t k, int64_t L,
                     int parts, __nv_bfloat16* xs) {
  check(L % 8 == 0 && (parts == 1 || parts == 3), "moe_gemm_gather: bad shape");
  const int64_t n = N * (L / 8);
  if (parts == 1) {
    cuda::launch(gather_parts<1>, blocks_for(n, 256), 256, 0, z, choice_of, N, k, L, xs);
  } else {
    cuda::launch(gather_parts<3>, blocks_for(n, 256), 256, 0, z, choice_of, N, k, L, xs);
  }
  check_launch("moe_experts (gemm gather)");
}

void moe_gemm_gate_up(const __nv_bfloat16* xs, int parts, const MoeGemmTiles& t,
                      const MoeGemmExpert* experts, int64_t N, int64_t L, int64_t I, SituParams p,
                      __nv_bfloat16* hs) {
  check_shape(parts, t, L, I);
  const GemmArgs a{xs, t, experts, N, L, I, p, hs, nullptr};
  if (parts == 1) {
    launch<1, true>(a);
  } else {
    launch<3, true>(a);
  }
}

void moe_gemm_down(const __nv_bfloat16* hs, int parts, const MoeGemmTiles& t,
                   const MoeGemmExpert* experts, int64_t N, int64_t I, int64_t L, float* y) {
  check_shape(parts, t, I, L);
  const GemmArgs a{hs, t, experts, N, I, L, {}, nullptr, y};
  if (parts == 1) {
    launch<1, false>(a);
  } else {
    launch<3, false>(a);
  }
}

}  // namespace k3::cuda
