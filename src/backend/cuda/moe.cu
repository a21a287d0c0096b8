// The routed experts on the device (moe_experts): the choices are grouped by expert on the
// device (no copy back to the host), each expert's rows gathered, the gate/up/down projections
// run for all experts together, SiTU-GLU in between, and every token's outputs combined in
// choice order.
//   MXFP4 experts, steps of up to 128 tokens (decode batches): the tensor-core kernels of
//     moe_mma.cu straight from the packed weights, each weight byte read once per window of an
//     expert's slots (once per step at batch 1); 8 launches per layer; activations as one bf16
//     part when the caller allows (bf16_act), else three;
//   BF16/F32 experts, steps of up to 128 tokens: grouped GEMV kernels straight from the stored
//     weights, one block row per (active expert, 8 weight rows), each weight row read once per
//     8 of its tokens; 9 launches per layer whatever the expert count;
//   MXFP4 experts, larger steps (prefill): the grouped GEMMs of moe_gemm.cu, one launch per
//     projection over all experts (tiles found on the device), SiTU-GLU fused into gate/up;
//     activations as one bf16 part when the caller allows (bf16_act), else three;
//   BF16/F32 experts, larger steps: the group offsets come back to the host and each expert
//     with rows runs the tensor-core linear (linear_device).
// Rows inside an expert group land in any order (atomics), which changes nothing: each row's
// result depends on its own input only, and the combine sums a token's choices in j order.
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/gemv.cuh"
#include "backend/cuda/launchers.h"
#include "backend/cuda/moe_gemm.h"
#include "backend/cuda/moe_mma.h"
#include "backend/cuda/runtime.cuh"

namespace k3 {
namespace {

using cuda::Args;
using cuda::blocks_for;
using cuda::check_launch;
using cuda::Scratch;
using cuda::stream;

constexpr int64_t kGroupedMaxT = 128;
constexpr int kWarps = 8;  // weight rows per block
constexpr int kTile = 8;   // token rows per pass over a weight row

struct ExpertPtrs {
  const void* data[3];       // gate, up, down
  const uint8_t* scales[3];  // MXFP4 only
};

__global__ void count_choices(const int32_t* sel, int64_t n, int32_t* counts) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) atomicAdd(&counts[sel[i]], 1);
}

// One block of kScanThreads: offsets [E+1], the list of experts with rows (ascending), and the
// fill cursors, as a block-wide exclusive scan of (slots, has slots) over the experts, 1024 at
// a time. (One thread walking 896 experts took longer than the batch-1 expert GEMVs' tail.)
constexpr int kScanThreads = 1024;
__global__ void __launch_bounds__(kScanThreads)
    scan_groups(const int32_t* counts, int E, int32_t* offsets, int32_t* active, int32_t* n_active,
                int32_t* fill) {
  __shared__ int2 warp_total[kScanThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int2 run = {0, 0};  // slots and active experts before this pass (the same in every thread)
  for (int base = 0; base < E; base += kScanThreads) {
    const int e = base + static_cast<int>(threadIdx.x);
    const int c = e < E ? counts[e] : 0, a = c > 0 ? 1 : 0;
    int2 v = {c, a};  // inclusive scan within the warp
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, v.x, o), y = __shfl_up_sync(0xffffffffu, v.y, o);
      if (lane >= o) v = {v.x + x, v.y + y};
    }
    if (lane == 31) warp_total[warp] = v;
    __syncthreads();
    int2 before = run, total = run;
    for (int w = 0; w < kScanThreads / 32; ++w) {
      const int2 p = warp_total[w];
      if (w < warp) before = {before.x + p.x, before.y + p.y};
      total = {total.x + p.x, total.y + p.y};
    }
    if (e < E) {
      const int32_t off = before.x + v.x - c;
      offsets[e] = off;
      fill[e] = off;
      if (a != 0) active[before.y + v.y - 1] = e;
    }
    run = total;
    __syncthreads();  // warp_total is rewritten by the next pass
  }
  if (threadIdx.x == 0) {
    offsets[E] = run.x;
    *n_active = run.y;
  }
}

__global__ void place_choices(const int32_t* sel, int64_t n, int32_t* fill, int32_t* slot_of,
                              int32_t* choice_of) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const int32_t slot = atomicAdd(&fill[sel[i]], 1);
  slot_of[i] = slot;
  choice_of[slot] = static_cast<int32_t>(i);
}

// zin [N, L]: slot s holds the latent row of token choice_of[s] / k.
__global__ void gather_slots(const float* z, const int32_t* choice_of, int64_t N, int64_t k,
                             int64_t L, float* zin) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= N * L) return;
  const int64_t s = i / L;
  zin[i] = z[(choice_of[s] / k) * L + i % L];
}

constexpr int kRowsPerWarp = 4;

// y [N, R] = x [N, C] · W_eᵀ for every active expert e over its slots (grid.y: active index);
// a warp owns kRowsPerWarp weight rows and walks the expert's slots kTile at a time.
template <int kFmt>  // 0 mxfp4, 1 bf16 (vectorised), 2 bf16/f32 any shape
__global__ void grouped_gemv(const float* x, const int32_t* offsets, const int32_t* active,
                             const int32_t* n_active, const ExpertPtrs* experts, int which,
                             bool bf16, int64_t R, int64_t C, float* y) {
  if (static_cast<int>(blockIdx.y) >= *n_active) return;
  const int e = active[blockIdx.y];
  const int64_t warp = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  const int64_t r0 = kFmt == 2 ? warp : warp * kRowsPerWarp;
  if (r0 >= R) return;
  const void* w = experts[e].data[which];
  const int64_t begin = offsets[e], end = offsets[e + 1];
  for (int64_t t0 = begin; t0 < end; t0 += kTile) {
    const int T = static_cast<int>(min(int64_t{kTile}, end - t0));
    const float* xt = x + t0 * C;
    if (kFmt == 2) {
      float acc[kTile] = {};
      cuda::row_dot_any<kTile>(w, bf16, r0, xt, C, T, acc);
      cuda::warp_finish<kTile>(acc, T, R, y + t0 * R + r0);
      continue;
    }
    float acc[kTile][kRowsPerWarp] = {};
    if (kFmt == 0) {
      cuda::rows_dot_mxfp4<kTile, kRowsPerWarp>(static_cast<const uint8_t*>(w),
                                                experts[e].scales[which], r0, R, xt, C, T, acc);
    } else {
      cuda::rows_dot_bf16<kTile, kRowsPerWarp>(static_cast<const uint16_t*>(w), r0, R, xt, C, T,
                                               acc);
    }
    cuda::warp_finish_rows<kTile, kRowsPerWarp>(acc, T, r0, R, R, y + t0 * R);
  }
}

__global__ void situ_kernel(float* a, const float* b, int64_t n, SituParams p) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float g = a[i], u = b[i];
  // The CPU's expression (multiplying by the inverse caps).
  a[i] = p.beta * tanhf(g * (1.0f / p.beta)) / (1.0f + expf(-g)) *
         (p.linear_beta * tanhf(u * (1.0f / p.linear_beta)));
}

// c [T, L]: c[t] = Σ_j weight[t, j] · y[slot_of[t*k + j]], from zero, in j order.
__global__ void combine(const float* y, const int32_t* slot_of, const float* weight, int64_t T,
                        int64_t k, int64_t L, float* c) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= T * L) return;
  const int64_t t = i / L, col = i % L;
  float acc = 0.0f;
  for (int64_t j = 0; j < k; ++j) acc += weight[t * k + j] * y[slot_of[t * k + j] * L + col];
  c[i] = acc;
}

int format_kind(const Mat& m, const float* x) {
  if (m.format == MatFormat::mxfp4) return 0;
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  return m.format == MatFormat::bf16 && m.cols % 8 == 0 && aligned ? 1 : 2;
}

void launch_grouped(const float* x, const int32_t* offsets, const int32_t* active,
                    const int32_t* n_active, const ExpertPtrs* experts, int which, const Mat& m,
                    int64_t max_active, float* y) {
  const int rows_per_block = format_kind(m, x) == 2 ? kWarps : kWarps * kRowsPerWarp;
  const dim3 grid(static_cast<unsigned>(blocks_for(m.rows, rows_per_block)),
                  static_cast<unsigned>(max_active));
  const bool bf16 = m.format == MatFormat::bf16;
  switch (format_kind(m, x)) {
    case 0:
      cuda::launch(grouped_gemv<0>, grid, 32 * kWarps, 0, x, offsets, active, n_active, experts,
                   which, bf16, m.rows, m.cols, y);
      break;
    case 1:
      cuda::launch(grouped_gemv<1>, grid, 32 * kWarps, 0, x, offsets, active, n_active, experts,
                   which, bf16, m.rows, m.cols, y);
      break;
    default:
      cuda::launch(grouped_gemv<2>, grid, 32 * kWarps, 0, x, offsets, active, n_active, experts,
                   which, bf16, m.rows, m.cols, y);
  }
  check_launch("moe_experts (grouped gemv)");
}

// The device table of the experts' MXFP4 pointers (resident weights translated), cached per
// experts array: a decode step would otherwise translate 3E matrices (two resident-map lookups
// each) and upload the table in every layer, host work that left the GPU idle for tens of us
// of a batch-1 step with 896 experts. An entry holds while the array holds the same weight
// pointers and no weight range has been made resident or released since. In the
// harness's host-staging mode every call builds its own (the weights are staged per call).
const cuda::Mxfp4Expert* mxfp4_table(Args& a, const ExpertMats* experts, int64_t E, bool& aligned) {
  auto build = [&](std::vector<cuda::Mxfp4Expert>& mx) {
    aligned = true;
    for (int64_t e = 0; e < E; ++e) {
      const Mat* src[3] = {&experts[e].gate, &experts[e].up, &experts[e].down};
      for (int w = 0; w < 3; ++w) {
        const Mat d = cuda::device_mat(a, *src[w]);
        mx[e].data[w] = static_cast<const uint8_t*>(d.data);
        mx[e].scales[w] = d.scales;
        aligned &= reinterpret_cast<uintptr_t>(d.data) % 16 == 0;
      }
    }
  };
  std::vector<cuda::Mxfp4Expert> mx;
  if (a.staging()) {
    mx.resize(static_cast<size_t>(E));
    build(mx);
    return a.host_array(mx.data(), mx.size());
  }
  struct Entry {
    std::vector<const void*> key;  // the host pointers the table translates, 6 an expert
    uint64_t generation = 0;
    bool aligned = false;
    cuda::Scratch table;
  };
  std::vector<const void*> key(static_cast<size_t>(6 * E));
  for (int64_t e = 0; e < E; ++e) {
    const Mat* src[3] = {&experts[e].gate, &experts[e].up, &experts[e].down};
    for (int w = 0; w < 3; ++w) {
      key[6 * e + 2 * w] = src[w]->data;
      key[6 * e + 2 * w + 1] = src[w]->scales;
    }
  }
  static std::mutex mu;
  static auto* cache = new std::unordered_map<const ExpertMats*, Entry>();  // never freed
  static uint64_t cache_generation = 0;
  const uint64_t gen = cuda::resident_generation();
  std::lock_guard<std::mutex> lock(mu);
  if (cuda::graph_mode() != cuda::GraphMode::off) {
    auto it = cache->find(experts);
    if (gen == cache_generation && it != cache->end() && it->second.table.get() != nullptr &&
        it->second.generation == gen && it->second.key == key) {
      aligned = it->second.aligned;
      return static_cast<const cuda::Mxfp4Expert*>(it->second.table.get());
    }
    // The cache's memory must not come from (or be freed inside) a graph: this step runs
    // without one and fills the cache; the table below only keeps the host code going.
    cuda::graph_abort();
    mx.resize(static_cast<size_t>(E));
    build(mx);
    return a.host_array(mx.data(), mx.size());
  }
  if (gen != cache_generation) {  // weights came or went (a model loaded, say): start afresh,
    cache->clear();               // so tables of arrays that are gone do not pile up
    cache_generation = gen;
  }
  Entry& en = (*cache)[experts];
  if (en.table.get() != nullptr && en.generation == gen && en.key == key) {
    aligned = en.aligned;
    return static_cast<const cuda::Mxfp4Expert*>(en.table.get());
  }
  mx.resize(static_cast<size_t>(E));
  build(mx);
  en.key = std::move(key);
  en.generation = gen;
  en.aligned = aligned;
  en.table = cuda::Scratch(mx.size() * sizeof(cuda::Mxfp4Expert));  // the old one freed in order
  cuda::copy_in_async(en.table.get(), mx.data(), mx.size() * sizeof(cuda::Mxfp4Expert),
                      "moe_experts (expert table)");
  return static_cast<const cuda::Mxfp4Expert*>(en.table.get());
}

// The grouped GEMMs (moe_gemm.h) from the grouping tables: c [T, L].
void moe_gemm_path(const float* dz, const int32_t* choice_of, const int32_t* slot_of,
                   const int32_t* offsets, const float* dw, const std::vector<ExpertPtrs>& ptrs,
                   const MoeExpertsShape& s, int64_t L, int64_t I, float* dc, Args& a) {
  const int64_t N = s.T * s.k, E = s.E;
  const int parts = s.bf16_act ? 1 : 3;
  std::vector<cuda::MoeGemmExpert> mx(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    for (int w = 0; w < 3; ++w) {
      mx[e].data[w] = static_cast<const uint8_t*>(ptrs[e].data[w]);
      mx[e].scales[w] = ptrs[e].scales[w];
    }
  }
  const cuda::MoeGemmExpert* dmx = a.host_array(mx.data(), mx.size());
  const int64_t max_tiles = cuda::moe_gemm_max_tiles(N, E);
  Scratch tiles_s(static_cast<size_t>(3 * max_tiles + 1) * sizeof(int32_t));
  auto* tp = static_cast<int32_t*>(tiles_s.get());
  const cuda::MoeGemmTiles tiles{tp, tp + max_tiles, tp + 2 * max_tiles, tp + 3 * max_tiles,
                                 max_tiles};
  Scratch xs_s(parts * N * L * 2), hs_s(parts * N * I * 2), y_s(N * L * sizeof(float));
  auto* xs = static_cast<__nv_bfloat16*>(xs_s.get());
  auto* hs = static_cast<__nv_bfloat16*>(hs_s.get());
  float* y = static_cast<float*>(y_s.get());
  cuda::moe_gemm_tiles(offsets, E, tiles);
  cuda::moe_gemm_gather(dz, choice_of, N, s.k, L, parts, xs);
  cuda::moe_gemm_gate_up(xs, parts, tiles, dmx, N, L, I, s.situ, hs);
  cuda::moe_gemm_down(hs, parts, tiles, dmx, N, I, L, y);
  cuda::launch(combine, blocks_for(s.T * L, 256), 256, 0, y, slot_of, dw, s.T, s.k, L, dc);
  check_launch("moe_experts (combine)");
}

}  // namespace

void moe_experts_cuda(const float* z, const int32_t* sel, const float* weight,
                      const ExpertMats* experts, MoeExpertsShape s, float* c) {
  const int64_t T = s.T, k = s.k, E = s.E, N = T * k;
  if (T == 0) return;
  const Mat& g0 = experts[0].gate;
  const int64_t L = g0.cols, I = g0.rows;
  for (int64_t e = 0; e < E; ++e) {
    const ExpertMats& m = experts[e];
    check(m.gate.format == g0.format && m.up.format == g0.format && m.down.format == g0.format &&
              m.gate.rows == I && m.up.rows == I && m.down.cols == I && m.gate.cols == L &&
              m.up.cols == L && m.down.rows == L,
          "moe_experts (cuda): expert ", e, " differs in shape or format from expert 0");
  }
  check(g0.format != MatFormat::mxfp4 || (L % 32 == 0 && I % 32 == 0),
        "moe_experts (cuda): MXFP4 widths must be multiples of 32");
  Args a;
  const float* dz = a.in(z, T * L);
  const int32_t* dsel = a.in(sel, N);
  const float* dw = a.in(weight, N);
  float* dc = a.out(c, T * L);
  // Grouping: int32 tables in one scratch block.
  Scratch tables(static_cast<size_t>(4 * E + 2 + 2 * N) * sizeof(int32_t));
  int32_t* counts = static_cast<int32_t*>(tables.get());
  int32_t *offsets = counts + E, *active = offsets + E + 1, *fill = active + E;
  int32_t *n_active = fill + E, *slot_of = n_active + 1, *choice_of = slot_of + N;
  cuda::memset_async(counts, 0, E * sizeof(int32_t), "moe_experts");
  cuda::launch(count_choices, blocks_for(N, 256), 256, 0, dsel, N, counts);
  cuda::launch(scan_groups, 1, kScanThreads, 0, counts, static_cast<int>(E), offsets, active,
               n_active, fill);
  cuda::launch(place_choices, blocks_for(N, 256), 256, 0, dsel, N, fill, slot_of, choice_of);
  check_launch("moe_experts (grouping)");
  bool mma_aligned = false;  // the tensor-core kernels copy weight rows 16 bytes at a time
  const cuda::Mxfp4Expert* dmx = g0.format == MatFormat::mxfp4 && T <= cuda::kMmaMaxT
                                     ? mxfp4_table(a, experts, E, mma_aligned)
                                     : nullptr;
  if (dmx != nullptr && mma_aligned) {
    // Tensor cores on the packed weights, activations as P bf16 parts (moe_mma.h).
    const cuda::MoeGroups grp{offsets, active, n_active, std::min(E, N)};
    const int P = s.bf16_act ? 1 : 3;
    Scratch zs_s(P * N * L * 2), hs_s(P * N * I * 2);
    Scratch g3_s(P * N * I * sizeof(float)), u3_s(P * N * I * sizeof(float));
    Scratch y3_s(P * N * L * sizeof(float));
    auto* zs = static_cast<__nv_bfloat16*>(zs_s.get());
    auto* hs = static_cast<__nv_bfloat16*>(hs_s.get());
    float* gu[2] = {static_cast<float*>(g3_s.get()), static_cast<float*>(u3_s.get())};
    float* y3 = static_cast<float*>(y3_s.get());
    cuda::moe_gather_split(dz, choice_of, N, k, L, P, zs);
    cuda::moe_mxfp4_mma(zs, P, grp, dmx, 0, 2, I, L, N, T, gu);  // gate and up in one launch
    cuda::moe_situ_split(gu[0], gu[1], N, I, P, s.situ, hs);
    cuda::moe_mxfp4_mma(hs, P, grp, dmx, 2, 1, L, I, N, T, &y3);
    cuda::moe_combine3(y3, P, slot_of, dw, T, k, L, dc);
    return;
  }
  std::vector<Mat> dev(static_cast<size_t>(3 * E));  // device views of every expert's weights
  std::vector<ExpertPtrs> ptrs(static_cast<size_t>(E));
  bool aligned = true;  // the grouped kernels read weight rows 16 bytes at a time
  for (int64_t e = 0; e < E; ++e) {
    const Mat* src[3] = {&experts[e].gate, &experts[e].up, &experts[e].down};
    for (int w = 0; w < 3; ++w) {
      dev[3 * e + w] = cuda::device_mat(a, *src[w]);
      ptrs[e].data[w] = dev[3 * e + w].data;
      ptrs[e].scales[w] = dev[3 * e + w].scales;
      aligned &= reinterpret_cast<uintptr_t>(ptrs[e].data[w]) % 16 == 0;
    }
  }
  if (g0.format == MatFormat::mxfp4 && aligned) {  // T > kMmaMaxT here
    moe_gemm_path(dz, choice_of, slot_of, offsets, dw, ptrs, s, L, I, dc, a);
    return;
  }
  Scratch zin_s(N * L * sizeof(float)), ga_s(N * I * sizeof(float)), up_s(N * I * sizeof(float));
  Scratch y_s(N * L * sizeof(float));
  float *zin = static_cast<float*>(zin_s.get()), *ga = static_cast<float*>(ga_s.get());
  float *up = static_cast<float*>(up_s.get()), *y = static_cast<float*>(y_s.get());
  cuda::launch(gather_slots, blocks_for(N * L, 256), 256, 0, dz, choice_of, N, k, L, zin);
  check_launch("moe_experts (gather)");
  if (T <= kGroupedMaxT && aligned) {
    const ExpertPtrs* dptrs = a.host_array(ptrs.data(), ptrs.size());
    const int64_t max_active = std::min(E, N);
    launch_grouped(zin, offsets, active, n_active, dptrs, 0, g0, max_active, ga);
    launch_grouped(zin, offsets, active, n_active, dptrs, 1, experts[0].up, max_active, up);
    cuda::launch(situ_kernel, blocks_for(N * I, 256), 256, 0, ga, up, N * I, s.situ);
    launch_grouped(ga, offsets, active, n_active, dptrs, 2, experts[0].down, max_active, y);
  } else {
    std::vector<int32_t> off(static_cast<size_t>(E + 1));
    cuda::check_cuda(cudaMemcpyAsync(off.data(), offsets, (E + 1) * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost, stream()),
                     "moe_experts (offsets)");
    cuda::check_cuda(cudaStreamSynchronize(stream()), "moe_experts (offsets)");
    for (int64_t e = 0; e < E; ++e) {
      const int64_t o = off[e], n = off[e + 1] - off[e];
      if (n == 0) continue;
      cuda::linear_device(zin + o * L, n, dev[3 * e], ga + o * I);
      cuda::linear_device(zin + o * L, n, dev[3 * e + 1], up + o * I);
    }
    cuda::launch(situ_kernel, blocks_for(N * I, 256), 256, 0, ga, up, N * I, s.situ);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t o = off[e], n = off[e + 1] - off[e];
      if (n > 0) cuda::linear_device(ga + o * I, n, dev[3 * e + 2], y + o * L);
    }
  }
  check_launch("moe_experts (situ)");
  cuda::launch(combine, blocks_for(T * L, 256), 256, 0, y, slot_of, dw, T, k, L, dc);
  check_launch("moe_experts (combine)");
}

}  // namespace k3
