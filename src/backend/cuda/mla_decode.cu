// Absorbed MLA over the paged latent cache for a whole batch of sequences (decode, and later
// prompt chunks), split-KV on the tensor cores. Per sequence the absorbed form is a small
// attention with one shared key/value stream: rows (token, head) of q̃ = [W_UKᵀ q^N ; q^R]
// (width W = Dc+Dr) against the cached rows ĉ‖r (keys, width W) and ĉ (values, width Dc).
// Every cached row is read from memory once per group of kRows (token, head) rows, so the
// cache streams at memory speed instead of once per head.
//   1. head_gemv: q̃ = scale · W_UKᵀ q^N per (token, head), q^R copied beside it (scale folded).
//   2. split_kv: one block per (sequence, key range, row group): tiles of kKeys cached rows are
//      widened to bf16 in shared memory, S = q̃ Kᵀ and O += P V by mma.sync, online softmax.
//   3. combine: the key ranges' partial (max, sum, O) of each row merged into ō.
//   4. head_gemv: o = W_UV ō per (token, head).
// Precision: kSplit (the op's launcher) carries every fp32 operand as bf16 hi + lo and adds
// hi·hi + hi·lo + lo·hi + lo·lo (fp32-grade: what is left is the ~2^-17 by which hi + lo misses
// each fp32 operand; without lo·lo a long-standing op case missed 2e-5); the bf16 variant uses
// hi·hi only.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>

#include "backend/cuda/gemv.cuh"
#include "backend/cuda/launchers.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/runtime.cuh"
#include "core/precision.h"

namespace k3 {
namespace {

using cuda::Args;
using cuda::check_launch;
using cuda::stream;

constexpr int kRows = 48;   // (token, head) rows per block: 3 m16 tiles
constexpr int kKeys = 32;   // cached rows per tile: 4 n8 tiles
constexpr int kWarps = 12;  // S: one 16x8 tile each; O: 16 n8 tiles of 512 each
constexpr int kThreads = kWarps * 32;
constexpr int kMaxDc = 512;  // O tiles per warp: kMaxDc / 8 / (kWarps / 3)
constexpr int kOTiles = kMaxDc / 8 / (kWarps / 3);
constexpr int kMaxW = 576;  // widest cached row (chunks of 4 prefetched per thread)
constexpr int kRowThreads = kThreads / kKeys;  // threads loading one cached row of a tile
constexpr int kChunks = (kMaxW / 4 + kRowThreads - 1) / kRowThreads;  // float4s per thread
constexpr int kRawTile = kKeys * kMaxW / 4;                           // float4s of one raw tile
// The bf16 kernel: warp w scores rows (w % 3)·16 … over the k-quarter w / 3 of the columns,
// its q̃ fragments held in registers for the whole item.
constexpr int kQuarters = kWarps / 3;
constexpr int kQSteps = (kMaxW / 16 + kQuarters - 1) / kQuarters;

struct SeqInfo {
  const float* base;
  int64_t stride;         // floats between cache blocks
  int64_t width;          // floats per cached row
  int32_t bt;             // rows per cache block; 0: contiguous
  int32_t table0;         // first entry of the sequence's block table in the packed tables
  int32_t tok0;           // its first compact token row
  int32_t n, n_past;      // queries, cached rows before them
  int32_t item0, groups;  // its first work item; row groups (items per key range)
  int32_t splits;         // key ranges; item of (range k, group g): item0 + k·groups + g
};

struct Item {
  int32_t seq, group, k0, k1;  // rows group*kRows …; keys [k0, k1)
};

__device__ inline const float* cache_row(const SeqInfo& s, const int32_t* tables, int key) {
  if (s.bt == 0) return s.base + int64_t{key} * s.width;
  return s.base + int64_t{tables[s.table0 + key / s.bt]} * s.stride + int64_t{key % s.bt} * s.width;
}

__device__ inline uint32_t pack_bf16(float lo_elem, float hi_elem) {
  const uint32_t a = __bfloat16_as_ushort(__float2bfloat16_rn(lo_elem));
  const uint32_t b = __bfloat16_as_ushort(__float2bfloat16_rn(hi_elem));
  return a | (b << 16);
}

__device__ inline float bf16_rest(float x) { return x - __bfloat162float(__float2bfloat16_rn(x)); }

__device__ inline uint32_t ld32(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// c [16x8 fp32] += a [16x16 bf16, row] · b [16x8 bf16, col]
__device__ inline void mma(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Shared memory of one block, carved from the dynamic buffer (bf16 rows of ldw elements).
struct Smem {
  float* s;                // [kRows, kKeys + 4] scores
  float* rowm;             // [kRows] running max
  float* rowl;             // [kRows] running sum
  float* alpha;            // [kRows] this tile's rescale
  int* lim;                // [kRows] last key the row sees (-1: padding row)
  __nv_bfloat16 *qh, *ql;  // [kRows, ldw]
  __nv_bfloat16 *kh, *kl;  // [kKeys, ldw]
  __nv_bfloat16 *ph, *pl;  // [kRows, kKeys + 8]
  float4* raw;             // [2][kKeys, c4] the next two tiles, fp32 (bf16 kernel only)
  static constexpr int kLdS = kKeys + 4, kLdP = kKeys + 8;

  // Score partials: one per k-quarter in the bf16 kernel (its q̃ lives in registers).
  __host__ __device__ static int parts(bool split) { return split ? 1 : kQuarters; }
  __host__ __device__ static size_t bytes(int ldw, bool split) {
    const size_t f = (parts(split) * kRows * kLdS + 3 * kRows) * 4 + kRows * 4;
    const size_t q = size_t{kRows} * ldw * 2, k = size_t{kKeys} * ldw * 2, p = kRows * kLdP * 2;
    const size_t raw = split ? 0 : 2 * sizeof(float4) * kRawTile;
    return f + (split ? 2 * (q + k + p) : k + p) + raw;
  }
  __device__ Smem(char* base, int ldw, bool split) {
    s = reinterpret_cast<float*>(base);
    rowm = s + parts(split) * kRows * kLdS;
    rowl = rowm + kRows;
    alpha = rowl + kRows;
    lim = reinterpret_cast<int*>(alpha + kRows);
    qh = reinterpret_cast<__nv_bfloat16*>(lim + kRows);
    kh = split ? qh + kRows * ldw : qh;  // no q̃ in shared memory for the bf16 kernel
    ph = kh + kKeys * ldw;
    ql = split ? ph + kRows * kLdP : qh;
    kl = split ? ql + kRows * ldw : kh;
    pl = split ? kl + kKeys * ldw : ph;
    raw = reinterpret_cast<float4*>(split ? pl + kRows * kLdP : ph + kRows * kLdP);
  }
};

// A tile's cached rows as float4 chunks: thread tid loads row tid / kRowThreads of the tile,
// chunks tid % kRowThreads + kRowThreads·i (one row lookup per tile, no division per chunk).
// Later tiles are in flight while the block computes on this one: kAsync copies the next two
// into raw fp32 buffers in shared memory (cp.async, no registers); otherwise the next one
// waits in registers, its first kHeld chunks only (the fp32-grade kernel has neither the
// shared memory nor the registers for more).
template <bool kAsync>
struct TileLoader {
  int c4, W;
  bool vec;  // rows are 16-byte aligned with W % 4 == 0
  int j, l;  // this thread's row of the tile and first chunk
  static constexpr int kHeld = kAsync ? 1 : kChunks / 2;
  float4 v[kHeld];
  const float* held_row;

  __device__ TileLoader(const SeqInfo& sq, int W_)
      : c4((W_ + 3) / 4), W(W_), j(threadIdx.x / kRowThreads), l(threadIdx.x % kRowThreads) {
    vec = W % 4 == 0 && sq.width % 4 == 0 && (sq.bt == 0 || sq.stride % 4 == 0) &&
          reinterpret_cast<uintptr_t>(sq.base) % 16 == 0;
  }
  __device__ const float* row(const SeqInfo& sq, const int32_t* tables, int kt, int k1) const {
    return kt + j < k1 ? cache_row(sq, tables, kt + j) : nullptr;
  }
  __device__ float4 chunk(const float* r, int i) const {
    const int col = (l + kRowThreads * i) * 4;
    float4 x = make_float4(0, 0, 0, 0);
    if (r == nullptr || col >= W) return x;
    if (vec) return __ldg(reinterpret_cast<const float4*>(r + col));
    x.x = __ldg(r + col);
    if (col + 1 < W) x.y = __ldg(r + col + 1);
    if (col + 2 < W) x.z = __ldg(r + col + 2);
    if (col + 3 < W) x.w = __ldg(r + col + 3);
    return x;
  }
  // Rows of exactly kChunks chunks a thread, 16-byte aligned (the 576-wide latent rows).
  __device__ bool full_rows() const { return vec && c4 == kChunks * kRowThreads; }
  // The raw tile's chunks of this thread as bf16, in two halves whose shared-memory reads are
  // all issued before any conversion: kh and the raw buffer do not overlap, which the compiler
  // cannot see, and without __restrict__ it converted one chunk at a time, each conversion
  // waiting for its own read (14% of the kernel's stall samples under ncu).
  __device__ void store_full_rows(__nv_bfloat16* __restrict__ dst,
                                  const float4* __restrict__ src) const {
    constexpr int kHalf = kChunks / 2;
    static_assert(kChunks % 2 == 0, "two halves");
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float4 x[kHalf];
#pragma unroll
      for (int i = 0; i < kHalf; ++i) x[i] = src[kRowThreads * (h * kHalf + i)];
#pragma unroll
      for (int i = 0; i < kHalf; ++i) {
        *reinterpret_cast<uint2*>(dst + 4 * kRowThreads * (h * kHalf + i)) =
            make_uint2(pack_bf16(x[i].x, x[i].y), pack_bf16(x[i].z, x[i].w));
      }
    }
  }
  // Starts tile kt (into buf: the async loader; nothing past k1); commits one copy group.
  __device__ void load(float4* buf, const SeqInfo& sq, const int32_t* tables, int kt, int k1) {
    if constexpr (kAsync) {
      if (kt < k1 && full_rows()) {
        // Every thread copies exactly kChunks chunks: a straight run of copies, no branch per
        // chunk; a row past k1 is zero-filled (source size 0: nothing is read).
        const float* r = row(sq, tables, kt, k1);
        const float* src = (r != nullptr ? r : sq.base) + 4 * l;
        const uint32_t bytes = r != nullptr ? 16 : 0;
        const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(buf + j * c4 + l));
#pragma unroll
        for (int i = 0; i < kChunks; ++i) {
          asm volatile(
              "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst + 16u * kRowThreads * i),
              "l"(src + 4 * kRowThreads * i), "r"(bytes));
        }
      } else if (kt < k1) {
        const float* r = row(sq, tables, kt, k1);
        for (int i = 0; i < kChunks && l + kRowThreads * i < c4; ++i) {
          const int c = l + kRowThreads * i;
          if (r != nullptr && vec) {
            const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(buf + j * c4 + c));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(r + 4 * c));
          } else {
            buf[j * c4 + c] = chunk(r, i);
          }
        }
      }
      asm volatile("cp.async.commit_group;\n" ::);
    } else {
      held_row = row(sq, tables, kt, k1);
#pragma unroll
      for (int i = 0; i < kHeld; ++i) v[i] = chunk(held_row, i);
    }
  }
  // The tile as bf16 (hi, and lo when split) in kh/kl; the async loader's copies of it must be
  // complete (cp.async.wait_group by the caller).
  __device__ void store(const Smem& sm, const float4* buf, int ldw, bool split) const {
    if (kAsync && !split && full_rows()) {  // the bf16 kernel's tiles (hi parts only)
      store_full_rows(sm.kh + j * ldw + 4 * l, buf + j * c4 + l);
      return;
    }
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = l + kRowThreads * i;
      if (c >= c4) break;
      float4 x;
      if constexpr (kAsync) {
        x = buf[j * c4 + c];
      } else {
        x = i < kHeld ? v[i < kHeld ? i : 0] : chunk(held_row, i);
      }
      *reinterpret_cast<uint2*>(sm.kh + j * ldw + 4 * c) =
          make_uint2(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w));
      if (split) {
        *reinterpret_cast<uint2*>(sm.kl + j * ldw + 4 * c) = make_uint2(
            pack_bf16(bf16_rest(x.x), bf16_rest(x.y)), pack_bf16(bf16_rest(x.z), bf16_rest(x.w)));
      }
    }
  }
};

// Loads the block's q̃ rows (hi, lo), zeroes the padding columns and the row state.
__device__ void init_rows(const Smem& sm, const float* qt, const SeqInfo& sq, const Item& it, int H,
                          int W, int ldw, bool split) {
  const int rows = sq.n * H, wp = (W + 15) / 16 * 16;
#pragma unroll 4
  for (int i = threadIdx.x; split && i < kRows * wp; i += blockDim.x) {
    const int r = i / wp, c = i % wp, R = it.group * kRows + r;
    const float x = R < rows && c < W ? qt[(int64_t{sq.tok0} * H + R) * W + c] : 0.0f;
    sm.qh[r * ldw + c] = __float2bfloat16_rn(x);
    if (split) sm.ql[r * ldw + c] = __float2bfloat16_rn(bf16_rest(x));
  }
  const int w4 = (W + 3) / 4 * 4;  // the loader writes columns < w4 of every tile
  for (int i = threadIdx.x; i < kKeys * (wp - w4); i += blockDim.x) {
    const int j = i / (wp - w4), c = w4 + i % (wp - w4);
    sm.kh[j * ldw + c] = __float2bfloat16_rn(0.0f);
    sm.kl[j * ldw + c] = __float2bfloat16_rn(0.0f);
  }
  for (int r = threadIdx.x; r < kRows; r += blockDim.x) {
    const int R = it.group * kRows + r;
    sm.lim[r] = R < rows ? sq.n_past + R / H : -1;
    sm.rowm[r] = -INFINITY;
    sm.rowl[r] = 0.0f;
  }
}

// S tile (m, n) of warp w (fp32-grade kernel): q̃ rows m·16 … against keys n·8 …, over all of
// wp columns; hi·hi, hi·lo, lo·hi and lo·lo in separate chains (independent mma.sync in flight).
__device__ void score_tile_split(const Smem& sm, int ldw, int wp) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int m = w / 4, n = w % 4;
  float c[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0}, c2[4] = {0, 0, 0, 0}, c3[4] = {0, 0, 0, 0};
  const int ra = (m * 16 + g) * ldw + 2 * t, rb = (n * 8 + g) * ldw + 2 * t;
#pragma unroll 2
  for (int k0 = 0; k0 < wp; k0 += 16) {
    const uint32_t a[4] = {ld32(sm.qh + ra + k0), ld32(sm.qh + ra + 8 * ldw + k0),
                           ld32(sm.qh + ra + k0 + 8), ld32(sm.qh + ra + 8 * ldw + k0 + 8)};
    const uint32_t b[2] = {ld32(sm.kh + rb + k0), ld32(sm.kh + rb + k0 + 8)};
    const uint32_t al[4] = {ld32(sm.ql + ra + k0), ld32(sm.ql + ra + 8 * ldw + k0),
                            ld32(sm.ql + ra + k0 + 8), ld32(sm.ql + ra + 8 * ldw + k0 + 8)};
    const uint32_t bl[2] = {ld32(sm.kl + rb + k0), ld32(sm.kl + rb + k0 + 8)};
    mma(c, a, b);
    mma(c1, a, bl);
    mma(c2, al, b);
    mma(c3, al, bl);
  }
  float* s = sm.s + (m * 16 + g) * Smem::kLdS + n * 8 + 2 * t;
  s[0] = c[0] + ((c1[0] + c2[0]) + c3[0]);
  s[1] = c[1] + ((c1[1] + c2[1]) + c3[1]);
  s[8 * Smem::kLdS] = c[2] + ((c1[2] + c2[2]) + c3[2]);
  s[8 * Smem::kLdS + 1] = c[3] + ((c1[3] + c2[3]) + c3[3]);
}

// The bf16 kernel's q̃ fragments of warp w: rows (w % 3)·16 …, k-steps (w / 3)·kQSteps + i.
__device__ void load_q_frags(const float* qt, const SeqInfo& sq, const Item& it, int H, int W,
                             uint32_t (&qa)[kQSteps][4]) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int m = w % 3, ks0 = (w / 3) * kQSteps, rows = sq.n * H;
  const int R0 = it.group * kRows + m * 16 + g;
  auto at = [&](int R, int c) {
    return R < rows && c < W ? qt[(int64_t{sq.tok0} * H + R) * W + c] : 0.0f;
  };
#pragma unroll
  for (int i = 0; i < kQSteps; ++i) {
    const int c = (ks0 + i) * 16 + 2 * t;
    qa[i][0] = pack_bf16(at(R0, c), at(R0, c + 1));
    qa[i][1] = pack_bf16(at(R0 + 8, c), at(R0 + 8, c + 1));
    qa[i][2] = pack_bf16(at(R0, c + 8), at(R0, c + 9));
    qa[i][3] = pack_bf16(at(R0 + 8, c + 8), at(R0 + 8, c + 9));
  }
}

// The bf16 kernel's S partial of warp w: rows (w % 3)·16 … by all kKeys keys over its
// k-quarter (four independent chains, one per n8 tile).
__device__ void score_tile_regs(const Smem& sm, int ldw, int wp, const uint32_t (&qa)[kQSteps][4]) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int m = w % 3, q = w / 3, ks0 = q * kQSteps;
  float c[4][4] = {};
#pragma unroll
  for (int i = 0; i < kQSteps; ++i) {
    const int k0 = (ks0 + i) * 16;
    if (k0 >= wp) break;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const int rb = (n * 8 + g) * ldw + 2 * t + k0;
      const uint32_t b[2] = {ld32(sm.kh + rb), ld32(sm.kh + rb + 8)};
      mma(c[n], qa[i], b);
    }
  }
  float* s = sm.s + (q * kRows + m * 16 + g) * Smem::kLdS + 2 * t;
#pragma unroll
  for (int n = 0; n < 4; ++n) {
    s[n * 8] = c[n][0];
    s[n * 8 + 1] = c[n][1];
    s[8 * Smem::kLdS + n * 8] = c[n][2];
    s[8 * Smem::kLdS + n * 8 + 1] = c[n][3];
  }
}

// Online softmax of the tile (scores in log2 units: log2 e is folded into q̃): thread t owns
// row t / 8, keys 4·(t % 8) … +3; the eight threads of a row are adjacent lanes.
static_assert(kThreads == kRows * 8, "softmax: eight threads per row");
__device__ void softmax_tile(const Smem& sm, int kt, int k1, bool split) {
  const int r = threadIdx.x / 8, j0 = 4 * (threadIdx.x % 8), lim = sm.lim[r];
  float4 s4 = *reinterpret_cast<const float4*>(sm.s + r * Smem::kLdS + j0);
  for (int q = 1; q < Smem::parts(split); ++q) {
    const float4 x = *reinterpret_cast<const float4*>(sm.s + (q * kRows + r) * Smem::kLdS + j0);
    s4.x += x.x, s4.y += x.y, s4.z += x.z, s4.w += x.w;
  }
  float v[4] = {s4.x, s4.y, s4.z, s4.w}, mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int key = kt + j0 + i;
    if (key >= k1 || key > lim) v[i] = -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
  for (int o = 1; o < 8; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  const float m_old = sm.rowm[r], m_new = fmaxf(m_old, mx);
  float p[4] = {0, 0, 0, 0}, alpha = 1.0f, sum = 0;
  if (m_new != -INFINITY) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      p[i] = v[i] == -INFINITY ? 0.0f : exp2f(v[i] - m_new);
      sum += p[i];
    }
    alpha = exp2f(m_old - m_new);  // 0 while the row saw nothing
  }
  for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  *reinterpret_cast<uint2*>(sm.ph + r * Smem::kLdP + j0) =
      make_uint2(pack_bf16(p[0], p[1]), pack_bf16(p[2], p[3]));
  if (split) {
    *reinterpret_cast<uint2*>(sm.pl + r * Smem::kLdP + j0) = make_uint2(
        pack_bf16(bf16_rest(p[0]), bf16_rest(p[1])), pack_bf16(bf16_rest(p[2]), bf16_rest(p[3])));
  }
  __syncwarp();  // every lane has read rowm[r]
  if (j0 == 0) {
    sm.rowl[r] = sm.rowl[r] * alpha + sum;
    sm.rowm[r] = m_new;
    sm.alpha[r] = alpha;
  }
}

// A operand of P rows m·16 … over keys ks·16 … (16x16 bf16).
__device__ inline void load_p(const __nv_bfloat16* P, int m, int ks, uint32_t* a) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int ra = (m * 16 + g) * Smem::kLdP + ks * 16 + 2 * t;
  a[0] = ld32(P + ra);
  a[1] = ld32(P + ra + 8 * Smem::kLdP);
  a[2] = ld32(P + ra + 8);
  a[3] = ld32(P + ra + 8 * Smem::kLdP + 8);
}

// B operands of values for both k-steps of the tile: keys 0 … 31 (k) by latent columns
// c0 … c0+7 (n), one transposing ldmatrix (lane i gives key row i).
__device__ inline void load_v(const __nv_bfloat16* K, int ldw, int c0, uint32_t* b0, uint32_t* b1) {
  const int lane = threadIdx.x % 32;
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(K + lane * ldw + c0));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b0[0]), "=r"(b0[1]), "=r"(b1[0]), "=r"(b1[1])
               : "r"(addr));
}

// O += P V for warp w's tiles: rows m = w % 3, value columns 8·(w/3 + 4i).
template <bool kSplit>
__device__ void value_tiles(const Smem& sm, int ldw, int Dc, float (&acc)[kOTiles][4]) {
  const int w = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, m = w % 3;
  const float a0 = sm.alpha[m * 16 + g], a1 = sm.alpha[m * 16 + g + 8];
  uint32_t ah0[4], ah1[4], al0[4], al1[4];
  load_p(sm.ph, m, 0, ah0);
  load_p(sm.ph, m, 1, ah1);
  if (kSplit) {
    load_p(sm.pl, m, 0, al0);
    load_p(sm.pl, m, 1, al1);
  }
#pragma unroll
  for (int i = 0; i < kOTiles; ++i) {
    const int c0 = 8 * (w / 3 + 4 * i);
    if (c0 >= Dc) continue;
    acc[i][0] *= a0;
    acc[i][1] *= a0;
    acc[i][2] *= a1;
    acc[i][3] *= a1;
    uint32_t b0[2], b1[2];
    load_v(sm.kh, ldw, c0, b0, b1);
    mma(acc[i], ah0, b0);
    mma(acc[i], ah1, b1);
    if (kSplit) {
      uint32_t bl0[2], bl1[2];
      load_v(sm.kl, ldw, c0, bl0, bl1);
      mma(acc[i], ah0, bl0);
      mma(acc[i], ah1, bl1);
      mma(acc[i], al0, b0);
      mma(acc[i], al1, b1);
      mma(acc[i], al0, bl0);
      mma(acc[i], al1, bl1);
    }
  }
}

// One work item: partial O [kRows, Dc] (unnormalised) and (max, sum) per row.
template <bool kSplit>
__global__ void __launch_bounds__(kThreads, 1)
    split_kv(const float* qt, const SeqInfo* seqs, const int32_t* tables, const Item* items, int H,
             int W, int Dc, int ldw, float* opart, float2* ml) {
  extern __shared__ __align__(16) char smem_raw[];
  const Item it = items[blockIdx.x];
  if (it.seq < 0) return;  // padding (upload_plan)
  const SeqInfo sq = seqs[it.seq];
  const Smem sm(smem_raw, ldw, kSplit);
  const int wp = (W + 15) / 16 * 16;
  init_rows(sm, qt, sq, it, H, W, ldw, kSplit);
  TileLoader<!kSplit> ld(sq, W);
  float acc[kOTiles][4] = {};
  uint32_t qa[kSplit ? 1 : kQSteps][4];
  if (!kSplit) load_q_frags(qt, sq, it, H, W, reinterpret_cast<uint32_t(&)[kQSteps][4]>(qa));
  float4 *raw0 = sm.raw, *raw1 = sm.raw + kRawTile;
  ld.load(raw0, sq, tables, it.k0, it.k1);
  if (!kSplit) ld.load(raw1, sq, tables, it.k0 + kKeys, it.k1);
  for (int kt = it.k0, n = 0; kt < it.k1; kt += kKeys, ++n) {
    if (!kSplit) asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // this tile's copies
    __syncthreads();  // the previous tile's reads of kh/kl/ph/pl are done
    float4* buf = n & 1 ? raw1 : raw0;
    ld.store(sm, buf, ldw, kSplit);
    __syncthreads();
    // In flight meanwhile: the tile after next (async: into the buffer just converted; each
    // thread reuses only its own chunks), or the next one (registers).
    ld.load(buf, sq, tables, kt + (kSplit ? 1 : 2) * kKeys, it.k1);
    if (kSplit) {
      score_tile_split(sm, ldw, wp);
    } else {
      score_tile_regs(sm, ldw, wp, reinterpret_cast<const uint32_t(&)[kQSteps][4]>(qa));
    }
    __syncthreads();
    softmax_tile(sm, kt, it.k1, kSplit);
    __syncthreads();
    value_tiles<kSplit>(sm, ldw, Dc, acc);
  }
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int m = w % 3;
  float* out = opart + int64_t{blockIdx.x} * kRows * Dc;
#pragma unroll
  for (int i = 0; i < kOTiles; ++i) {
    const int c = 8 * (w / 3 + 4 * i) + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = m * 16 + g + 8 * h;
      if (c < Dc) out[r * Dc + c] = acc[i][2 * h];
      if (c + 1 < Dc) out[r * Dc + c + 1] = acc[i][2 * h + 1];
    }
  }
  __syncthreads();
  for (int r = threadIdx.x; r < kRows; r += blockDim.x) {
    ml[int64_t{blockIdx.x} * kRows + r] = make_float2(sm.rowm[r], sm.rowl[r]);
  }
}

__device__ inline float block_reduce(float v, bool is_max, float* part) {
  for (int o = 16; o > 0; o >>= 1) {
    const float x = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, x) : v + x;
  }
  __syncthreads();  // part[] may still be read by a previous call
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  v = part[0];
  for (int i = 1; i < static_cast<int>(blockDim.x / 32); ++i)
    v = is_max ? fmaxf(v, part[i]) : v + part[i];
  return v;
}

// ō of compact row (j, h): the key ranges' partials merged, their weights e^{m_k − M} / L
// computed once (threads over ranges), then each column a sum over ranges with the loads in
// flight together.
__global__ void combine(const SeqInfo* seqs, const int32_t* row_seq, const float* opart,
                        const float2* ml, int H, int Dc, float* obar) {
  extern __shared__ float wk[];  // [splits] weights
  __shared__ float part[32];
  const int row = blockIdx.x, j = row / H, h = row % H;
  const SeqInfo sq = seqs[row_seq[j]];
  const int R = (j - sq.tok0) * H + h, g = R / kRows, r = R % kRows;
  auto item = [&](int k) { return int64_t{sq.item0} + int64_t{k} * sq.groups + g; };
  float M = -INFINITY;
  for (int k = threadIdx.x; k < sq.splits; k += blockDim.x) M = fmaxf(M, ml[item(k) * kRows + r].x);
  M = block_reduce(M, true, part);
  float L = 0;
  for (int k = threadIdx.x; k < sq.splits; k += blockDim.x) {
    const float2 x = ml[item(k) * kRows + r];
    const float e = x.x == -INFINITY ? 0.0f : exp2f(x.x - M);  // log2 units
    wk[k] = e;
    L += e * x.y;
  }
  L = block_reduce(L, false, part);  // its barriers also publish wk[]
  const float inv = 1.0f / L;
  for (int c = threadIdx.x; c < Dc; c += blockDim.x) {
    float a = 0;
#pragma unroll 4
    for (int k = 0; k < sq.splits; ++k) a += wk[k] * opart[(item(k) * kRows + r) * Dc + c];
    obar[int64_t{row} * Dc + c] = a * inv;
  }
}

// out(j, h, o) = scale · Σ_i W[h·head_rows + row_off + o, i] · in(j, h, i) for n_tok compact
// token rows j; in/out rows through optional maps (the step's token rows).
struct HeadGemv {
  const void* w;
  bool bf16;
  int head_rows, row_off, n_out, n_in;
  const float* in;
  int in_ld;
  const int32_t* in_map;
  float* out;
  int out_ld;
  const int32_t* out_map;
  int n_tok, H;
  float scale;
};

// A block: kGemvOuts outputs (lane) × kGemvToks tokens (one per warp) of one head, token
// chunks along grid z; the weight tile and the chunk's inputs in shared memory, read as
// float4 along i (the weight tile is read again per chunk, from L2).
constexpr int kGemvOuts = 32, kGemvWarps = 8, kGemvToks = kGemvWarps;
constexpr int kGemvThreads = 32 * kGemvWarps;

__host__ __device__ inline int gemv_ld(int n_in) { return (n_in + 31) / 32 * 32 + 4; }

__global__ void head_gemv(HeadGemv p) {
  extern __shared__ float4 gsm4[];
  float* gsm = reinterpret_cast<float*>(gsm4);
  const int h = blockIdx.x, o0 = blockIdx.y * kGemvOuts, j0 = blockIdx.z * kGemvToks;
  const int ld = gemv_ld(p.n_in), n4 = (p.n_in + 3) / 4 * 4;
  const int nj = min(kGemvToks, p.n_tok - j0);
  float* wt = gsm;                   // [kGemvOuts, ld]
  float* xs = gsm + kGemvOuts * ld;  // [kGemvToks, n4]
#pragma unroll 8
  for (int i = threadIdx.x; i < kGemvOuts * n4; i += blockDim.x) {
    const int o = i / n4, c = i % n4;
    float x = 0;
    if (o0 + o < p.n_out && c < p.n_in) {
      const int64_t e = (int64_t{h} * p.head_rows + p.row_off + o0 + o) * p.n_in + c;
      x = p.bf16 ? __uint_as_float(uint32_t{static_cast<const uint16_t*>(p.w)[e]} << 16)
                 : static_cast<const float*>(p.w)[e];
    }
    wt[o * ld + c] = x;
  }
#pragma unroll 8
  for (int i = threadIdx.x; i < kGemvToks * n4; i += blockDim.x) {
    const int t = i / n4, c = i % n4;
    float x = 0;
    if (t < nj && c < p.n_in) {
      const int64_t row = p.in_map != nullptr ? p.in_map[j0 + t] : j0 + t;
      x = p.in[(row * p.H + h) * p.in_ld + c];
    }
    xs[i] = x;
  }
  __syncthreads();
  const int o = threadIdx.x % 32, t = threadIdx.x / 32;
  if (t >= nj || o0 + o >= p.n_out) return;
  const float4* w4 = reinterpret_cast<const float4*>(wt + o * ld);
  const float4* x4 = reinterpret_cast<const float4*>(xs + t * n4);
  float a0 = 0, a1 = 0;  // two chains
  int c = 0;
  for (; c + 1 < n4 / 4; c += 2) {
    const float4 w = w4[c], x = x4[c], w1 = w4[c + 1], x1 = x4[c + 1];
    a0 += w.x * x.x + w.y * x.y + w.z * x.z + w.w * x.w;
    a1 += w1.x * x1.x + w1.y * x1.y + w1.z * x1.z + w1.w * x1.w;
  }
  if (c < n4 / 4) {
    const float4 w = w4[c], x = x4[c];
    a0 += w.x * x.x + w.y * x.y + w.z * x.z + w.w * x.w;
  }
  const int64_t row = p.out_map != nullptr ? p.out_map[j0 + t] : j0 + t;
  p.out[(row * p.H + h) * p.out_ld + o0 + o] = (a0 + a1) * p.scale;
}

// The same product straight from global memory for BF16 W (n_in % 8 == 0, rows and inputs
// 16-byte aligned): a warp owns kHeadRows output rows of one head and walks n_in 8 weights a
// lane at a time (16-byte loads) for up to kHeadToks tokens (token chunks along grid y). At a
// decode step (one token, or a few per head) the tiled kernel above staged a 32-row tile into
// shared memory by 2-byte loads for one warp's use: 23 and 68 µs per step for what is 12.6 MB
// of weights each, read here at the copy rate.
constexpr int kHeadRows = 4, kHeadToks = 8, kHeadWarps = 8;

template <int kT>
__global__ void __launch_bounds__(32 * kHeadWarps) head_gemv_rows(HeadGemv p) {
  const int lane = threadIdx.x % 32;
  const int per_head = (p.n_out + kHeadRows - 1) / kHeadRows;
  const int64_t gw = int64_t{blockIdx.x} * kHeadWarps + threadIdx.x / 32;
  const int h = static_cast<int>(gw / per_head), o0 = static_cast<int>(gw % per_head) * kHeadRows;
  if (h >= p.H) return;
  const int j0 = blockIdx.y * kT, nj = min(kT, p.n_tok - j0);
  const auto* w = static_cast<const uint16_t*>(p.w);
  const uint16_t* row[kHeadRows];
#pragma unroll
  for (int r = 0; r < kHeadRows; ++r)
    row[r] = w + (int64_t{h} * p.head_rows + p.row_off + min(o0 + r, p.n_out - 1)) * p.n_in;
  const float* x[kT];
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    const int j = j0 + min(t, nj - 1);
    const int64_t tr = p.in_map != nullptr ? p.in_map[j] : j;
    x[t] = p.in + (tr * p.H + h) * p.in_ld;
  }
  float acc[kT][kHeadRows] = {};
#pragma unroll 2
  for (int i = lane * 8; i < p.n_in; i += 256) {
    float v[kHeadRows][8];
#pragma unroll
    for (int r = 0; r < kHeadRows; ++r) cuda::load_bf16x8(row[r] + i, v[r]);
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      if (t >= nj) break;
      const float4 a = *reinterpret_cast<const float4*>(x[t] + i);
      const float4 b = *reinterpret_cast<const float4*>(x[t] + i + 4);
#pragma unroll
      for (int r = 0; r < kHeadRows; ++r) {
        acc[t][r] += v[r][0] * a.x + v[r][1] * a.y + v[r][2] * a.z + v[r][3] * a.w + v[r][4] * b.x +
                     v[r][5] * b.y + v[r][6] * b.z + v[r][7] * b.w;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    if (t >= nj) break;
    const int64_t orow = p.out_map != nullptr ? p.out_map[j0 + t] : j0 + t;
#pragma unroll
    for (int r = 0; r < kHeadRows; ++r) {
      const float sum = cuda::warp_sum(acc[t][r]);
      if (lane == 0 && o0 + r < p.n_out)
        p.out[(orow * p.H + h) * p.out_ld + o0 + r] = sum * p.scale;
    }
  }
}

bool rows_path_ok(const HeadGemv& p) {
  auto al16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return p.bf16 && p.n_in % 8 == 0 && p.in_ld % 4 == 0 && al16(p.w) && al16(p.in);
}

// q̃'s rope part: qt[j, h, Dc + i] = scale · q[tok[j], h, Dn + i].
__global__ void copy_rope(const float* q, const int32_t* tok, int n_tok, int H, int Dn, int Dr,
                          int Dc, float scale, float* qt) {
  const int64_t n = int64_t{n_tok} * H * Dr;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t jh = i / Dr, j = jh / H, h = jh % H, c = i % Dr;
    qt[jh * (Dc + Dr) + Dc + c] = scale * q[(int64_t{tok[j]} * H + h) * (Dn + Dr) + Dn + c];
  }
}

void launch_gemv(const HeadGemv& p) {
  if (p.n_tok == 0 || p.n_out == 0) return;
  // The row kernel for up to one chunk of tokens: past that it reads the weights again per
  // chunk with few warps an SM (151 registers at 8 tokens), 330 µs per call at 64 tokens
  // against the tiled kernel's 253.
  if (p.n_tok <= kHeadToks && rows_path_ok(p)) {
    const int64_t warps = int64_t{p.H} * ((p.n_out + kHeadRows - 1) / kHeadRows);
    const dim3 grid(static_cast<unsigned>(cuda::blocks_for(warps, kHeadWarps)),
                    static_cast<unsigned>(cuda::blocks_for(p.n_tok, kHeadToks)));
    if (p.n_tok == 1) {
      cuda::launch(head_gemv_rows<1>, grid, 32 * kHeadWarps, 0, p);
    } else {
      cuda::launch(head_gemv_rows<kHeadToks>, grid, 32 * kHeadWarps, 0, p);
    }
    check_launch("mla head_gemv (rows)");
    return;
  }
  const size_t smem =
      static_cast<size_t>(kGemvOuts * gemv_ld(p.n_in) + kGemvToks * ((p.n_in + 3) / 4 * 4)) * 4;
  check(smem <= 200 * 1024, "mla_absorbed_batch (cuda): head width ", p.n_in, " too large");
  static size_t configured = 48 * 1024;
  if (smem > configured) {
    cuda::check_cuda(cudaFuncSetAttribute(head_gemv, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)),
                     "head_gemv smem attribute");
    configured = smem;
  }
  const dim3 grid(static_cast<unsigned>(p.H),
                  static_cast<unsigned>(cuda::blocks_for(p.n_out, kGemvOuts)),
                  static_cast<unsigned>(cuda::blocks_for(p.n_tok, kGemvToks)));
  cuda::launch(head_gemv, grid, kGemvThreads, smem, p);
  check_launch("mla head_gemv");
}

size_t mat_bytes(const Mat& m) {
  return static_cast<size_t>(m.rows * m.cols) * (m.format == MatFormat::bf16 ? 2 : 4);
}

// The host plan of one call: sequences, packed block tables, work items, compact token rows.
struct Plan {
  std::vector<SeqInfo> seqs;
  std::vector<int32_t> tables, tok, row_seq;
  std::vector<Item> items;
};

// Key ranges: about four blocks per multiprocessor over the whole batch, in whole tiles.
Plan make_plan(Args& a, const MlaBatchSeq* seqs, int64_t n_seqs, int64_t H) {
  Plan p;
  int64_t work = 0;  // key tiles × row groups
  for (int64_t i = 0; i < n_seqs; ++i) {
    const int64_t S = seqs[i].n_past + seqs[i].n, G = (seqs[i].n * H + kRows - 1) / kRows;
    if (seqs[i].n > 0) work += (S + kKeys - 1) / kKeys * G;
  }
  const int64_t target = 4 * int64_t{cuda::sm_count()};
  const int64_t tiles_per_item = std::max<int64_t>(2, (work + target - 1) / target);
  for (int64_t i = 0; i < n_seqs; ++i) {
    const MlaBatchSeq& s = seqs[i];
    if (s.n == 0) continue;
    const int64_t S = s.n_past + s.n, G = (s.n * H + kRows - 1) / kRows;
    const int64_t tiles = (S + kKeys - 1) / kKeys;
    const int64_t splits = (tiles + tiles_per_item - 1) / tiles_per_item;
    const int64_t per = (tiles + splits - 1) / splits * kKeys;  // keys per range, even
    check(S < (int64_t{1} << 30), "mla_absorbed_batch (cuda): context of ", S, " rows");
    const PagedRows& c = s.cache;
    const bool contiguous = c.block_tokens >= S;
    SeqInfo si{};
    const int64_t nb = contiguous ? 1 : (S - 1) / c.block_tokens + 1;
    int64_t extent = 0;  // floats of the cache the rows reach (for staging)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t rows = std::min(contiguous ? S : c.block_tokens, S - b * c.block_tokens);
      extent = std::max(extent, c.blocks[b] * c.block_stride + rows * c.width);
    }
    si.base = a.in(c.base, static_cast<size_t>(extent));
    if (contiguous) si.base += c.blocks[0] * c.block_stride;
    si.stride = c.block_stride;
    si.width = c.width;
    si.bt = contiguous ? 0 : static_cast<int32_t>(c.block_tokens);
    si.table0 = static_cast<int32_t>(p.tables.size());
    if (!contiguous) p.tables.insert(p.tables.end(), c.blocks, c.blocks + nb);
    si.tok0 = static_cast<int32_t>(p.tok.size());
    si.n = static_cast<int32_t>(s.n);
    si.n_past = static_cast<int32_t>(s.n_past);
    si.item0 = static_cast<int32_t>(p.items.size());
    si.groups = static_cast<int32_t>(G);
    si.splits = static_cast<int32_t>(splits);
    const int32_t seq = static_cast<int32_t>(p.seqs.size());
    for (int64_t k = 0; k < splits; ++k) {
      for (int64_t g = 0; g < G; ++g) {
        p.items.push_back({seq, static_cast<int32_t>(g), static_cast<int32_t>(k * per),
                           static_cast<int32_t>(std::min(S, (k + 1) * per))});
      }
    }
    for (int64_t t = 0; t < s.n; ++t) {
      p.tok.push_back(static_cast<int32_t>(s.t0 + t));
      p.row_seq.push_back(seq);
    }
    p.seqs.push_back(si);
  }
  return p;
}

// The plan's arrays in one upload.
struct DevicePlan {
  const SeqInfo* seqs;
  const int32_t *tables, *tok, *row_seq;
  const Item* items;
  int64_t n_items;  // items launched: the plan's, padded (padding items have seq -1)
};

// Capacities that change only when a count doubles: the launch grid, the upload's layout and
// the scratch sizes then stay the same from one decode step to the next while the contexts
// grow, so a graphed step replays (graph.cuh).
int64_t bucket(int64_t n) {
  int64_t c = 16;
  while (c < n) c *= 2;
  return c;
}

DevicePlan upload_plan(Args& a, const Plan& p) {
  const int64_t cap_items = bucket(static_cast<int64_t>(p.items.size()));
  const size_t n_seq = p.seqs.size() * sizeof(SeqInfo), n_it = cap_items * sizeof(Item);
  const size_t n_tab = bucket(static_cast<int64_t>(p.tables.size())) * 4, n_tok = p.tok.size() * 4;
  std::vector<uint8_t> buf(n_seq + n_it + n_tab + 2 * n_tok + 16);
  uint8_t* b = buf.data();
  std::memcpy(b, p.seqs.data(), n_seq);
  std::memcpy(b + n_seq, p.items.data(), p.items.size() * sizeof(Item));
  const Item pad{-1, 0, 0, 0};
  for (int64_t i = static_cast<int64_t>(p.items.size()); i < cap_items; ++i) {
    std::memcpy(b + n_seq + i * sizeof(Item), &pad, sizeof pad);
  }
  std::memcpy(b + n_seq + n_it, p.tables.data(), p.tables.size() * 4);
  std::memcpy(b + n_seq + n_it + n_tab, p.tok.data(), n_tok);
  std::memcpy(b + n_seq + n_it + n_tab + n_tok, p.row_seq.data(), n_tok);
  const uint8_t* d = a.host_array(buf.data(), buf.size());
  return {reinterpret_cast<const SeqInfo*>(d),
          reinterpret_cast<const int32_t*>(d + n_seq + n_it),
          reinterpret_cast<const int32_t*>(d + n_seq + n_it + n_tab),
          reinterpret_cast<const int32_t*>(d + n_seq + n_it + n_tab + n_tok),
          reinterpret_cast<const Item*>(d + n_seq),
          cap_items};
}

template <bool kSplit>
void launch_split_kv(const float* qt, const DevicePlan& dp, int64_t n_items, MlaShape d,
                     float* opart, float2* ml) {
  const int W = static_cast<int>(d.Dc + d.Dr), ldw = (W + 15) / 16 * 16 + 8;
  const size_t smem = Smem::bytes(ldw, kSplit);
  static size_t configured = 48 * 1024;
  if (smem > configured) {
    cuda::check_cuda(
        cudaFuncSetAttribute(split_kv<kSplit>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem)),
        "split_kv smem attribute");
    configured = smem;
  }
  cuda::launch(split_kv<kSplit>, static_cast<unsigned>(n_items), kThreads, smem, qt, dp.seqs,
               dp.tables, dp.items, static_cast<int>(d.H), W, static_cast<int>(d.Dc), ldw, opart,
               ml);
  check_launch("mla split_kv");
}

template <bool kSplit>
void run_batch(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs, const MlaAbsorbedWeights& w,
               MlaShape d, float* o) {
  const int64_t H = d.H, Dq = d.Dn + d.Dr, W = d.Dc + d.Dr;
  int64_t T = 0, n_tok = 0;
  for (int64_t i = 0; i < n_seqs; ++i) {
    if (seqs[i].n == 0) continue;
    T = std::max(T, seqs[i].t0 + seqs[i].n);
    n_tok += seqs[i].n;
  }
  if (n_tok == 0 || H == 0) return;
  const Mat& uk = w.uk_t;
  check(uk.format == w.kv_b.format && uk.format != MatFormat::mxfp4,
        "mla_absorbed_batch (cuda): BF16 or F32 attention weights only");
  if (d.Dc > kMaxDc || W > kMaxW) {  // wider than the tiles: one sequence at a time
    const int64_t Dv = d.Dv;
    for (int64_t i = 0; i < n_seqs; ++i) {
      if (seqs[i].n == 0) continue;
      MlaShape sh = d;
      sh.T = seqs[i].n;
      sh.n_past = seqs[i].n_past;
      mla_absorbed_simple_cuda(q + seqs[i].t0 * H * Dq, seqs[i].cache, w, sh,
                               o + seqs[i].t0 * H * Dv);
    }
    return;
  }
  Args a;
  const Plan plan = make_plan(a, seqs, n_seqs, H);
  const DevicePlan dp = upload_plan(a, plan);
  const float* dq = a.in(q, T * H * Dq);
  float* dout = a.inout(o, T * H * d.Dv);  // rows of other sequences are kept
  const void* duk = a.in(static_cast<const uint8_t*>(uk.data), mat_bytes(uk));
  const void* dkv = a.in(static_cast<const uint8_t*>(w.kv_b.data), mat_bytes(w.kv_b));
  const bool bf16 = uk.format == MatFormat::bf16;
  // The softmax scale, and log2 e: the kernels' scores are in log2 units (exp2f).
  const float scale = 1.4426950408889634f / sqrtf(static_cast<float>(Dq));
  const int64_t n_items = dp.n_items;
  cuda::Scratch qt(n_tok * H * W * 4), obar(n_tok * H * d.Dc * 4);
  cuda::Scratch opart(n_items * kRows * d.Dc * 4), ml(n_items * kRows * 8);
  auto* dqt = static_cast<float*>(qt.get());
  auto* dobar = static_cast<float*>(obar.get());
  const int Hi = static_cast<int>(H), nt = static_cast<int>(n_tok);
  launch_gemv({duk, bf16, static_cast<int>(d.Dc), 0, static_cast<int>(d.Dc), static_cast<int>(d.Dn),
               dq, static_cast<int>(Dq), dp.tok, dqt, static_cast<int>(W), nullptr, nt, Hi, scale});
  if (d.Dr > 0) {
    cuda::launch(copy_rope, cuda::blocks_for(n_tok * H * d.Dr, 256), 256, 0, dq, dp.tok, nt, Hi,
                 static_cast<int>(d.Dn), static_cast<int>(d.Dr), static_cast<int>(d.Dc), scale,
                 dqt);
    check_launch("mla copy_rope");
  }
  launch_split_kv<kSplit>(dqt, dp, n_items, d, static_cast<float*>(opart.get()),
                          static_cast<float2*>(ml.get()));
  int max_splits = 1;
  for (const SeqInfo& si : plan.seqs) max_splits = std::max(max_splits, si.splits);
  check(max_splits <= 12 * 1024, "mla_absorbed_batch (cuda): ", max_splits, " key ranges");
  // wk[] padded by a float4: the unrolled sum may read (not use) up to three past the end.
  const size_t wk_bytes = (static_cast<size_t>(bucket(max_splits)) + 4) * sizeof(float);
  cuda::launch(combine, static_cast<unsigned>(n_tok * H), 128, wk_bytes, dp.seqs, dp.row_seq,
               static_cast<const float*>(opart.get()), static_cast<const float2*>(ml.get()), Hi,
               static_cast<int>(d.Dc), dobar);
  check_launch("mla combine");
  launch_gemv({dkv, bf16, static_cast<int>(d.Dn + d.Dv), static_cast<int>(d.Dn),
               static_cast<int>(d.Dv), static_cast<int>(d.Dc), dobar, static_cast<int>(d.Dc),
               nullptr, dout, static_cast<int>(d.Dv), dp.tok, nt, Hi, 1.0f});
}

}  // namespace

void mla_absorbed_batch_cuda(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                             const MlaAbsorbedWeights& w, MlaShape dims, float* o) {
  // bf16 precision (core/precision.h): scores and probabilities as single bf16 parts, a third
  // of the fp32-grade kernel's matrix work (the op's tolerance then is bf16 precision's).
  if (active_precision() == Precision::bf16) {
    run_batch<false>(q, seqs, n_seqs, w, dims, o);
    return;
  }
  run_batch<true>(q, seqs, n_seqs, w, dims, o);
}

void mla_absorbed_batch_bf16_cuda(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                                  const MlaAbsorbedWeights& w, MlaShape dims, float* o) {
  run_batch<false>(q, seqs, n_seqs, w, dims, o);
}

}  // namespace k3
