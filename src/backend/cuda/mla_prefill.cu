// Flash-style expanded MLA attention in bf16 precision (mla_prefill.h). q, k, v are first
// rounded to bf16 into head-major copies ([H, rows, D]: a key tile is one contiguous block).
// A block of 4 warps owns 64 queries of one head (16 a warp, Q fragments in registers) and
// walks the causal window in key tiles of 64, double-buffered by cp.async (K [64, 192] and
// V [64, 128] bf16, 16-byte chunks XOR-swizzled by row for ldmatrix):
//   S = Q Kᵀ        mma.sync m16n8k16, fp32 accumulate (K rows are the B operand as stored)
//   online softmax  per row in fp32 (exp2 with the scale folded in), masked past the window
//   O += P V        P rounded to bf16 straight from the S accumulators (the A-fragment layout
//                   of m16n8k16 matches two n8 accumulator tiles), V through ldmatrix.trans
// Blocks run the longest windows first (the last query tiles).
#include <cuda_bf16.h>

#include "backend/cuda/mla_prefill.h"
#include "backend/cuda/runtime.cuh"

namespace k3::cuda {
namespace {

constexpr int kDq = 192, kDv = 128;  // the K3 head widths
constexpr int kQT = 64, kKT = 64;    // queries per block, keys per tile
constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kQChunks = kDq / 8, kVChunks = kDv / 8;  // 16-byte chunks a row

__device__ inline uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Element offset of (row, chunk) in a tile of `chunks` 16-byte chunks a row; the low three
// chunk bits XOR the row so that 8 rows of one chunk column hit 8 bank groups.
template <int kChunks>
__device__ inline int swz(int row, int chunk) {
  return row * kChunks * 8 + (((chunk & ~7) | ((chunk ^ row) & 7)) << 3);
}
__device__ inline void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
__device__ inline void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void ldsm_x4_t(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// dst [H, rows, D] bf16 = src [rows, H, D] fp32, 8 values a thread (D % 8 == 0).
__global__ void to_heads_bf16(const float* src, int64_t rows, int64_t H, int64_t D,
                              __nv_bfloat16* dst) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, per = D / 8;
  if (i >= rows * H * per) return;
  const int64_t c = (i % per) * 8, rh = i / per, h = rh % H, r = rh / H;
  const float* s = src + rh * D + c;
  const uint4 out = make_uint4(pack_bf16(s[0], s[1]), pack_bf16(s[2], s[3]), pack_bf16(s[4], s[5]),
                               pack_bf16(s[6], s[7]));
  *reinterpret_cast<uint4*>(dst + (h * rows + r) * D + c) = out;
}

struct FlashArgs {
  const __nv_bfloat16 *q, *k, *v;  // [H, T, Dq], [H, S, Dq], [H, S, Dv]
  int64_t T, S, n_past, H;
  float scale_log2;  // 1/sqrt(Dq) · log2(e)
  float* o;          // [T, H, Dv]
};

__global__ void __launch_bounds__(kThreads) flash_mla(FlashArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  auto* Qs = reinterpret_cast<__nv_bfloat16*>(smem);  // [kQT, kDq]
  __nv_bfloat16* Ks = Qs + kQT * kDq;                 // [2][kKT, kDq]
  __nv_bfloat16* Vs = Ks + 2 * kKT * kDq;             // [2][kKT, kDv]
  const int qt = gridDim.x - 1 - blockIdx.x;          // longest windows first
  const int64_t h = blockIdx.y, q0 = int64_t{qt} * kQT;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const __nv_bfloat16* qh = a.q + h * a.T * kDq;
  const __nv_bfloat16* kh = a.k + h * a.S * kDq;
  const __nv_bfloat16* vh = a.v + h * a.S * kDv;
  // Keys the block needs: up to the last query's window.
  const int64_t n_keys = min(a.S, a.n_past + min(a.T, q0 + kQT));
  const int n_tiles = static_cast<int>((n_keys + kKT - 1) / kKT);

  for (int i = tid; i < kQT * kQChunks; i += kThreads) {
    const int r = i / kQChunks, c = i % kQChunks;
    const bool ok = q0 + r < a.T;
    cp_async16(smem_addr(Qs + swz<kQChunks>(r, c)), qh + (ok ? (q0 + r) * kDq + c * 8 : 0), ok);
  }
  auto load_kv = [&](int tile, int stage) {
    const int64_t k0 = int64_t{tile} * kKT;
    for (int i = tid; i < kKT * kQChunks; i += kThreads) {
      const int r = i / kQChunks, c = i % kQChunks;
      const bool ok = k0 + r < a.S;
      cp_async16(smem_addr(Ks + stage * kKT * kDq + swz<kQChunks>(r, c)),
                 kh + (ok ? (k0 + r) * kDq + c * 8 : 0), ok);
    }
    for (int i = tid; i < kKT * kVChunks; i += kThreads) {
      const int r = i / kVChunks, c = i % kVChunks;
      const bool ok = k0 + r < a.S;
      cp_async16(smem_addr(Vs + stage * kKT * kDv + swz<kVChunks>(r, c)),
                 vh + (ok ? (k0 + r) * kDv + c * 8 : 0), ok);
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  uint32_t qf[kDq / 16][4];  // this warp's 16 queries as A fragments
  float o[kDv / 8][4] = {};  // O accumulators: n8 tiles of Dv
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows lane/4 and lane/4 + 8
  const int64_t t_row0 = q0 + warp * 16 + (lane >> 2);       // query of row lane/4

  for (int tile = 0; tile < n_tiles; ++tile) {
    if (tile + 1 < n_tiles) load_kv(tile + 1, (tile + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int kk = 0; kk < kDq / 16; ++kk) {
        ldsm_x4(smem_addr(Qs + swz<kQChunks>(warp * 16 + (lane & 15), kk * 2 + (lane >> 4))),
                qf[kk]);
      }
    }
    const __nv_bfloat16* Kt = Ks + (tile & 1) * kKT * kDq;
    const __nv_bfloat16* Vt = Vs + (tile & 1) * kKT * kDv;
    const int64_t k0 = int64_t{tile} * kKT;
    float s[kKT / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kDq / 16; ++kk) {
#pragma unroll
      for (int nj = 0; nj < kKT / 16; ++nj) {  // two n8 key tiles per ldmatrix
        uint32_t b[4];
        ldsm_x4(smem_addr(Kt + swz<kQChunks>(nj * 16 + (lane & 7) + ((lane >> 4) << 3),
                                             kk * 2 + ((lane >> 3) & 1))),
                b);
        mma(s[2 * nj], qf[kk], b[0], b[1]);
        mma(s[2 * nj + 1], qf[kk], b[2], b[3]);
      }
    }
    // Mask (keys past a row's window or past S) and the online softmax, in log2 units.
    const bool edge = k0 + kKT > a.n_past + q0 + warp * 16 || k0 + kKT > a.S;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int j = 0; j < kKT / 8; ++j) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int hr = c >> 1;
        const int64_t key = k0 + j * 8 + 2 * (lane & 3) + (c & 1);
        float x = s[j][c] * a.scale_log2;
        if (edge && (key > a.n_past + t_row0 + 8 * hr || key >= a.S)) x = -INFINITY;
        s[j][c] = x;
        mx[hr] = fmaxf(mx[hr], x);
      }
    }
    float alpha[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
      mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
      const float base = mx[hr] == -INFINITY ? 0.0f : mx[hr];  // a row with no key yet
      alpha[hr] = exp2f(m[hr] - base);
      m[hr] = mx[hr];
      l[hr] *= alpha[hr];
    }
#pragma unroll
    for (int j = 0; j < kKT / 8; ++j) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int hr = c >> 1;
        const float base = m[hr] == -INFINITY ? 0.0f : m[hr];
        const float p = exp2f(s[j][c] - base);
        s[j][c] = p;
        l[hr] += p;
      }
    }
#pragma unroll
    for (int d = 0; d < kDv / 8; ++d) {
      o[d][0] *= alpha[0];
      o[d][1] *= alpha[0];
      o[d][2] *= alpha[1];
      o[d][3] *= alpha[1];
    }
    // O += P V: key block kb (16 keys) is the A fragment of accumulator tiles 2kb, 2kb + 1.
#pragma unroll
    for (int kb = 0; kb < kKT / 16; ++kb) {
      const uint32_t pa[4] = {pack_bf16(s[2 * kb][0], s[2 * kb][1]),
                              pack_bf16(s[2 * kb][2], s[2 * kb][3]),
                              pack_bf16(s[2 * kb + 1][0], s[2 * kb + 1][1]),
                              pack_bf16(s[2 * kb + 1][2], s[2 * kb + 1][3])};
#pragma unroll
      for (int nd = 0; nd < kDv / 16; ++nd) {  // two n8 tiles of Dv per ldmatrix.trans
        uint32_t b[4];
        ldsm_x4_t(smem_addr(Vt + swz<kVChunks>(kb * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                               nd * 2 + (lane >> 4))),
                  b);
        mma(o[2 * nd], pa, b[0], b[1]);
        mma(o[2 * nd + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // the next load overwrites this stage
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 1);
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 2);
    const int64_t t = t_row0 + 8 * hr;
    if (t >= a.T) continue;
    const float inv = 1.0f / l[hr];
    float* dst = a.o + (t * a.H + h) * kDv + 2 * (lane & 3);
#pragma unroll
    for (int d = 0; d < kDv / 8; ++d) {
      *reinterpret_cast<float2*>(dst + d * 8) =
          make_float2(o[d][2 * hr] * inv, o[d][2 * hr + 1] * inv);
    }
  }
}

}  // namespace

bool mla_prefill_bf16_supported(const MlaShape& s) { return s.Dn + s.Dr == kDq && s.Dv == kDv; }

void mla_prefill_bf16(const float* q, const float* k, const float* v, const MlaShape& s, float* o) {
  check(mla_prefill_bf16_supported(s), "mla_prefill_bf16: head widths ", s.Dn + s.Dr, "/", s.Dv,
        " (takes 192/128)");
  const int64_t S = s.n_past + s.T, H = s.H;
  Scratch qb_s(s.T * H * kDq * 2), kb_s(S * H * kDq * 2), vb_s(S * H * kDv * 2);
  auto* qb = static_cast<__nv_bfloat16*>(qb_s.get());
  auto* kb = static_cast<__nv_bfloat16*>(kb_s.get());
  auto* vb = static_cast<__nv_bfloat16*>(vb_s.get());
  cuda::launch(to_heads_bf16, blocks_for(s.T * H * kDq / 8, 256), 256, 0, q, s.T, H, kDq, qb);
  cuda::launch(to_heads_bf16, blocks_for(S * H * kDq / 8, 256), 256, 0, k, S, H, kDq, kb);
  cuda::launch(to_heads_bf16, blocks_for(S * H * kDv / 8, 256), 256, 0, v, S, H, kDv, vb);
  check_launch("mla prefill (bf16 copies)");
  constexpr int kSmem = (kQT * kDq + 2 * kKT * (kDq + kDv)) * 2;
  static bool configured = false;
  if (!configured) {
    check_cuda(cudaFuncSetAttribute(flash_mla, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
               "mla prefill (smem)");
    configured = true;
  }
  const FlashArgs fa{qb, kb,       vb, s.T,
                     S,  s.n_past, H,  1.0f / sqrtf(static_cast<float>(kDq)) * 1.4426950408889634f,
                     o};
  const dim3 grid(static_cast<unsigned>((s.T + kQT - 1) / kQT), static_cast<unsigned>(H));
  cuda::launch(flash_mla, grid, kThreads, kSmem, fa);
  check_launch("mla prefill (flash)");
}

}  // namespace k3::cuda
