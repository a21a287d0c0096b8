// The chunked KDA prefill as two launches (kda_chunked.cu includes this after the body, whose
// helpers it uses). The fused kernel walks each sequence's chunks in order doing everything a
// chunk needs; most of that does not depend on the state, so here it runs for every chunk at
// once and only the state products stay sequential:
//   kda_intra (one block per chunk and head, all in parallel): Γ, A_kk, A_qk, Tinv as the fused
//     kernel, then into a workspace slot
//       Wn = −Tinv (β ⊙ e^Γ ⊙ K)   Qp = Q ⊙ e^Γ + A_qk Wn   Kg = K ⊙ e^{Γ_n−Γ}   e^{Γ_n}
//       U = Tinv (β ⊙ V)           Oi = A_qk U
//   kda_state (one block per sequence, head and 32 value columns, chunks in order):
//       Ṽ = U + Wn S,  O = Oi + Qp S,  S ← Diag(e^{Γ_n}) S + Kgᵀ Ṽ
// (O = Q e^Γ S + A_qk Ṽ of the fused form with Ṽ = U + Wn S expanded.) A batch too large for
// the workspace runs in windows of chunks per sequence; the state carries over in place.

// The workspace's operands (Wn, Qp, Kg): fp32 for fp32-grade products (they are split hi + lo),
// bf16 in bf16 precision (half the bytes through the workspace, and a state-pass block small
// enough for two an SM; the products round them to tf32 anyway, bf16 keeps 3 bits fewer).
template <bool kSplit>
using WsT = std::conditional_t<kSplit, float, __nv_bfloat16>;

// A slot (one chunk and head), byte offsets: Wn, Qp, Kg [kC][kKP] of T; e^{Γ_n} [kKP] float;
// U, Oi [kC][Vp] float (they start accumulators: kept in fp32).
template <typename T>
struct Slot {
  static constexpr int64_t kMat = int64_t{kC} * kKP * sizeof(T);
  static constexpr int64_t wn = 0, qp = kMat, kg = 2 * kMat, egn = 3 * kMat,
                           u = 3 * kMat + kKP * sizeof(float);
  __host__ __device__ static constexpr int64_t oi(int Vp) { return u + int64_t{kC} * Vp * 4; }
  __host__ __device__ static constexpr int64_t bytes(int Vp) {
    return u + 2 * int64_t{kC} * Vp * 4;
  }
};
static_assert(Slot<__nv_bfloat16>::u % 16 == 0 && Slot<float>::u % 16 == 0, "16-byte copies");

template <typename T, typename P>
__device__ __forceinline__ T* at(P* base, int64_t byte_offset) {
  return reinterpret_cast<T*>(reinterpret_cast<char*>(base) + byte_offset);
}
template <typename T, typename P>
__device__ __forceinline__ const T* at(const P* base, int64_t byte_offset) {
  return reinterpret_cast<const T*>(reinterpret_cast<const char*>(base) + byte_offset);
}

struct Chunk {
  int64_t t;  // first token row
  int n;      // rows (≤ kC)
  int slot;   // workspace slot
};
struct Run {   // one sequence's chunks of a window
  int64_t t0;  // first token row
  int64_t n;   // rows
  int slot0;   // the first chunk's slot (the others follow)
  float* S;    // [H, K, V]
};

constexpr int kLdW = kKP + 8;  // Wn in the (free) state buffer, read as a B operand
static_assert(kC * kLdW <= kKP * kLdS, "Wn lives in the state buffer");

template <bool kSplit>
__global__ void __launch_bounds__(kThreads, 1)
    kda_intra(const KdaInputs in, const Chunk* chunks, Dims d, int Vp, bool vec, char* ws) {
  using T = WsT<kSplit>;
  using L = Slot<T>;
  extern __shared__ float4 smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const Chunk c = chunks[blockIdx.x];
  const int h = blockIdx.y, tid = threadIdx.x, warp = tid / 32;
  char* slot = ws + (static_cast<int64_t>(c.slot) * d.H + h) * L::bytes(Vp);
  T* slot_wn = at<T>(slot, L::wn);
  T* slot_qp = at<T>(slot, L::qp);
  T* slot_kg = at<T>(slot, L::kg);
  load_chunk(sm, in, d, c.t, c.n, h, 0, vec);
  chunk_algebra<kSplit>(sm);
  const int m0 = kSub * (warp % 4);  // the warp's sub-chunk (Tinv, A_qk: columns < m0 + 16)
  float* Wn = sm.S;
  {  // Wn = Tinv (−β k e^Γ): 16 rows × 32 channels a warp
    const int n0 = 32 * (warp / 4);
    float acc[1][4][4] = {};
    warp_mma<kSplit>(
        acc, [&](int r, int s) { return sm.Tinv[r * kLdA + s]; },
        [&](int s, int i) { return sm.G[s * kLdQ + i]; }, m0, n0, 0, m0 + kSub);
    for_acc<1, 4>(m0, n0, [&](int, int nt, int e, int r, int i) {
      Wn[r * kLdW + i] = acc[0][nt][e];
      slot_wn[r * kKP + i] = static_cast<T>(acc[0][nt][e]);
    });
  }
  for (int e = tid; e < kC * kKP; e += kThreads) {
    slot_kg[e] = static_cast<T>(sm.k[e / kKP * kLdQ + e % kKP]);
  }
  if (tid < kKP) at<float>(slot, L::egn)[tid] = sm.egn[tid];
  __syncthreads();
  {  // Qp = q e^Γ + A_qk Wn
    const int n0 = 32 * (warp / 4);
    float acc[1][4][4];
    for_acc<1, 4>(m0, n0,
                  [&](int, int nt, int e, int r, int i) { acc[0][nt][e] = sm.q[r * kLdQ + i]; });
    warp_mma<kSplit>(
        acc, [&](int r, int s) { return sm.Aqk[r * kLdA + s]; },
        [&](int s, int i) { return Wn[s * kLdW + i]; }, m0, n0, 0, m0 + kSub);
    for_acc<1, 4>(m0, n0, [&](int, int nt, int e, int r, int i) {
      slot_qp[r * kKP + i] = static_cast<T>(acc[0][nt][e]);
    });
  }
  float* U = at<float>(slot, L::u);
  float* Oi = at<float>(slot, L::oi(Vp));
  for (int j0 = 0; j0 < Vp; j0 += kVT) {  // 64 value columns at a time, 16 a warp
    if (j0 > 0) {
      __syncthreads();  // R and Ṽ are free again
      load_values(sm, in, d, c.t, c.n, h, j0, vec);
      __syncthreads();
    }
    const int n0 = 16 * (warp / 4);
    {  // U = Tinv (β v)
      float acc[1][2][4] = {};
      warp_mma<kSplit>(
          acc, [&](int r, int s) { return sm.Tinv[r * kLdA + s]; },
          [&](int s, int j) { return sm.beta[s] * sm.R[s * kLdS + j]; }, m0, n0, 0, m0 + kSub);
      for_acc<1, 2>(m0, n0, [&](int, int nt, int e, int r, int j) {
        sm.Vn[r * kLdS + j] = acc[0][nt][e];
        U[r * Vp + j0 + j] = acc[0][nt][e];
      });
    }
    __syncthreads();
    {  // Oi = A_qk U
      float acc[1][2][4] = {};
      warp_mma<kSplit>(
          acc, [&](int r, int s) { return sm.Aqk[r * kLdA + s]; },
          [&](int s, int j) { return sm.Vn[s * kLdS + j]; }, m0, n0, 0, m0 + kSub);
      for_acc<1, 2>(m0, n0,
                    [&](int, int nt, int e, int r, int j) { Oi[r * Vp + j0 + j] = acc[0][nt][e]; });
    }
  }
}

// The state pass: 32 value columns a block, kWS = 8 or 16 warps (K3_KDA_STATE_WARPS). Row strides
// for conflict-free fragment reads, in 32-bit words mod 32: A-fragment rows (Wn/Qp) 4 apart
// (kKP + 4 floats, kKP + 8 halves); Kg (read transposed) 8 in fp32, 4 in bf16 (kKP + 8
// elements either way); S and Ṽ (B fragments) 8.
constexpr int kVS = 32;
constexpr int kLdS2 = kVS + 8, kLdK2 = kKP + 8;
template <typename T>
constexpr int lda2() {
  return sizeof(T) == 4 ? kKP + 4 : kKP + 8;
}
// fp32 operands (kBuf = 2): Kg, e^{Γ_n} and the U / Oi columns double-buffered, the next chunk's
// arriving while this one's products run; one block an SM. bf16 operands (kBuf = 1): one buffer
// each and two blocks an SM, each hiding the other's copies. Wn / Qp has one buffer either way:
// its next copy starts once the first product has read it.
template <typename T, int kBuf>
struct StateSmem {
  float S[kKP * kLdS2];     // the state tile [K, 32]
  T A[2 * kC * lda2<T>()];  // Wn (rows 0–63) over Qp (64–127)
  T Kg[kBuf][kC * kLdK2];
  float UO[kBuf][2 * kC * kLdS2];  // U's columns (rows 0–63) over Oi's (64–127)
  float Vn[kC * kLdS2];            // Ṽ
  float egn[kBuf][kKP];
};
template <bool kSplit>
using StateSmemOf = StateSmem<WsT<kSplit>, kSplit ? 2 : 1>;
static_assert(sizeof(StateSmemOf<true>) <= 227 * 1024, "the fp32 state pass fits one SM");
static_assert(sizeof(StateSmemOf<false>) <= 113 * 1024, "two bf16 state-pass blocks an SM");

// Blocks an SM of the state pass: two for bf16 operands at 8 warps (registers ≤ 128 a thread).
template <bool kSplit, int kWS>
constexpr int state_blocks() {
  return !kSplit && kWS == 8 ? 2 : 1;
}

// rows × kKP elements of a slot into shared rows of stride ld, in flight (cp.async).
template <typename T>
__device__ __forceinline__ void copy_rows(T* dst, int ld, const T* src, int rows) {
  constexpr int kPer = 16 / sizeof(T);  // elements a copy
  for (int e = threadIdx.x; e < rows * kKP / kPer; e += blockDim.x) {
    const int r = e / (kKP / kPer), i = e % (kKP / kPer) * kPer;
    cp_async16(dst + r * ld + i, src + r * kKP + i, true);
  }
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }

template <bool kSplit, int kWS>
__global__ void __launch_bounds__(32 * kWS, (state_blocks<kSplit, kWS>()))
    kda_state(const Run* runs, Dims d, int Vp, const char* ws, float* o) {
  using T = WsT<kSplit>;
  using L = Slot<T>;
  constexpr int kBuf = kSplit ? 2 : 1, kLdA2 = lda2<T>();
  extern __shared__ float4 smem_raw[];
  StateSmemOf<kSplit>& sm = *reinterpret_cast<StateSmemOf<kSplit>*>(smem_raw);
  const int vt = Vp / kVS;
  const Run run = runs[blockIdx.x / vt];
  const int h = blockIdx.y, j0 = static_cast<int>(blockIdx.x % vt) * kVS;
  // Warp tiles: rows 16·(warp % 8), kNS n8 tiles from column n0.
  constexpr int kThreadsS = 32 * kWS, kNS = 4 / (kWS / 8);
  const int tid = threadIdx.x, warp = tid / 32, m0 = 16 * (warp % 8), n0 = 8 * kNS * (warp / 8);
  float* Sg = run.S + static_cast<int64_t>(h) * d.K * d.V;
  for (int e = tid; e < kKP * kVS; e += kThreadsS) {
    const int i = e / kVS, j = e % kVS;
    sm.S[i * kLdS2 + j] =
        i < d.K && j0 + j < d.V ? Sg[static_cast<int64_t>(i) * d.V + j0 + j] : 0.0f;
  }
  auto slot = [&](int c) {
    return ws + (static_cast<int64_t>(run.slot0 + c) * d.H + h) * L::bytes(Vp);
  };
  // Chunk c's U and Oi columns, and its Kg and e^{Γ_n}, into buffer b (in flight).
  auto copy_uo = [&](int c, int b) {
    const float* u = at<float>(slot(c), L::u);
    for (int e = tid; e < 2 * kC * kVS / 4; e += kThreadsS) {
      const int r = e / (kVS / 4), j = e % (kVS / 4) * 4;  // U rows 0–63, then Oi's: adjacent
      cp_async16(sm.UO[b] + r * kLdS2 + j, u + int64_t{r} * Vp + j0 + j, true);
    }
  };
  auto copy_kg = [&](int c, int b) {
    copy_rows(sm.Kg[b], kLdK2, at<T>(slot(c), L::kg), kC);
    if (tid < kKP / 4) cp_async16(sm.egn[b] + 4 * tid, at<float>(slot(c), L::egn) + 4 * tid, true);
  };
  const int chunks = static_cast<int>((run.n + kC - 1) / kC);
  copy_rows(sm.A, kLdA2, at<T>(slot(0), L::wn), 2 * kC);  // Wn and Qp are adjacent
  copy_uo(0, 0);
  copy_kg(0, 0);
  commit_copies();
  for (int c = 0; c < chunks; ++c) {
    const int n = static_cast<int>(std::min<int64_t>(kC, run.n - int64_t{c} * kC));
    const int64_t t = run.t0 + int64_t{c} * kC;
    const int b = c % kBuf;
    const bool more = c + 1 < chunks;
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();  // chunk c's copies landed; buffer 1 − b was last read at chunk c − 1
    if (kBuf == 2 && more) {
      copy_uo(c + 1, 1 - b);
      copy_kg(c + 1, 1 - b);
      commit_copies();
    }
    {  // Ṽ = U + Wn S (rows 0–63), O = Oi + Qp S (rows 64–127)
      const bool out = m0 >= kC;
      const int r0 = out ? m0 - kC : m0;
      const float* init = sm.UO[b] + (out ? kC * kLdS2 : 0);
      float acc[1][kNS][4];
      for_acc<1, kNS>(
          r0, n0, [&](int, int nt, int e, int r, int j) { acc[0][nt][e] = init[r * kLdS2 + j]; });
      warp_mma<kSplit>(
          acc, [&](int r, int i) { return static_cast<float>(sm.A[r * kLdA2 + i]); },
          [&](int i, int j) { return sm.S[i * kLdS2 + j]; }, m0, n0, 0, kKP);
      for_acc<1, kNS>(r0, n0, [&](int, int nt, int e, int r, int j) {
        if (!out) {
          sm.Vn[r * kLdS2 + j] = acc[0][nt][e];
        } else if (r < n && j0 + j < d.V) {
          o[((t + r) * d.H + h) * d.V + j0 + j] = acc[0][nt][e];
        }
      });
    }
    __syncthreads();
    if (more) {  // the next chunk's Wn, Qp (and U / Oi, single-buffered) behind the state update
      copy_rows(sm.A, kLdA2, at<T>(slot(c + 1), L::wn), 2 * kC);
      if (kBuf == 1) copy_uo(c + 1, 0);
      commit_copies();
    }
    {  // S ← Diag(e^{Γ_n}) S + Kgᵀ Ṽ
      const T* Kg = sm.Kg[b];
      const float* egn = sm.egn[b];
      float acc[1][kNS][4];
      for_acc<1, kNS>(m0, n0, [&](int, int nt, int e, int i, int j) {
        acc[0][nt][e] = egn[i] * sm.S[i * kLdS2 + j];
      });
      warp_mma<kSplit>(
          acc, [&](int i, int r) { return static_cast<float>(Kg[r * kLdK2 + i]); },
          [&](int r, int j) { return sm.Vn[r * kLdS2 + j]; }, m0, n0, 0, kC);
      for_acc<1, kNS>(
          m0, n0, [&](int, int nt, int e, int i, int j) { sm.S[i * kLdS2 + j] = acc[0][nt][e]; });
    }
    if (kBuf == 1 && more) {
      __syncthreads();  // Kg and e^{Γ_n} are read
      copy_kg(c + 1, 0);
      commit_copies();
    }
  }
  __syncthreads();
  for (int e = tid; e < kKP * kVS; e += kThreadsS) {
    const int i = e / kVS, j = e % kVS;
    if (i < d.K && j0 + j < d.V) Sg[static_cast<int64_t>(i) * d.V + j0 + j] = sm.S[i * kLdS2 + j];
  }
}

// Workspace bound of the split form: K3_KDA_WORKSPACE_MB (default 2048: the whole of an 8K
// prompt of 96 heads in one window; read at each call).
int64_t workspace_budget_bytes() {
  const char* e = std::getenv("K3_KDA_WORKSPACE_MB");
  const int64_t mb = e != nullptr && std::atoll(e) > 0 ? std::atoll(e) : 2048;
  return mb << 20;
}

// Warps a state-pass block: K3_KDA_STATE_WARPS=8|16 (default 8; read at each call: A/B runs).
int state_warps() {
  const char* e = std::getenv("K3_KDA_STATE_WARPS");
  return e != nullptr && std::atoi(e) == 16 ? 16 : 8;
}

template <bool kSplit>
void launch_split_as(Args& a, const KdaInputs& d, const std::vector<Seg>& segs, KdaShape s,
                     float* o) {
  static bool configured = false;
  if (!configured) {
    cuda::check_cuda(
        cudaFuncSetAttribute(kda_intra<kSplit>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(sizeof(Smem))),
        "kda_intra smem attribute");
    const int smem = static_cast<int>(sizeof(StateSmemOf<kSplit>));
    cuda::check_cuda(cudaFuncSetAttribute(kda_state<kSplit, 8>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                     "kda_state smem attribute");
    cuda::check_cuda(cudaFuncSetAttribute(kda_state<kSplit, 8>,
                                          cudaFuncAttributePreferredSharedMemoryCarveout, 100),
                     "kda_state carveout");  // all of it: two bf16 blocks an SM
    cuda::check_cuda(cudaFuncSetAttribute(kda_state<kSplit, 16>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                     "kda_state smem attribute");
    configured = true;
  }
  const int Vp = static_cast<int>((s.V + kVT - 1) / kVT * kVT);
  const int64_t slot_bytes = s.H * Slot<WsT<kSplit>>::bytes(Vp);
  int64_t total = 0;
  for (const Seg& g : segs) total += (g.n + kC - 1) / kC;
  // A window holds up to per_seg chunks of every sequence: at least one each, so more sequences
  // than the bound allows slots get one slot each (the bound is exceeded then, never overrun).
  const int64_t n_segs = static_cast<int64_t>(segs.size());
  const int64_t budget = std::max<int64_t>(1, workspace_budget_bytes() / slot_bytes);
  const int64_t per_seg = std::max<int64_t>(1, std::min(total, budget) / n_segs);
  const int64_t slots = std::min(total, per_seg * n_segs);
  check(slots < (int64_t{1} << 31), "kda_chunked (cuda): workspace too large");
  cuda::Scratch ws(static_cast<size_t>(slots * slot_bytes));
  char* wsp = static_cast<char*>(ws.get());
  const Dims dims{static_cast<int>(s.H), static_cast<int>(s.K), static_cast<int>(s.V)};
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = s.K % 4 == 0 && s.V % 4 == 0 && al(d.q) && al(d.k) && al(d.g) && al(d.v);
  for (int64_t w = 0;; ++w) {  // window w: chunks [w, w + 1) · per_seg of every sequence
    std::vector<Chunk> chunks;
    std::vector<Run> runs;
    for (const Seg& g : segs) {
      const int64_t nch = (g.n + kC - 1) / kC, c0 = w * per_seg, c1 = std::min(nch, c0 + per_seg);
      if (c0 >= nch) continue;
      const int slot0 = static_cast<int>(chunks.size());
      runs.push_back({g.t0 + c0 * kC, std::min(g.n, c1 * kC) - c0 * kC, slot0, g.S});
      for (int64_t c = c0; c < c1; ++c) {
        chunks.push_back({g.t0 + c * kC, static_cast<int>(std::min<int64_t>(kC, g.n - c * kC)),
                          static_cast<int>(chunks.size())});
      }
    }
    if (runs.empty()) break;
    const dim3 g1(static_cast<unsigned>(chunks.size()), static_cast<unsigned>(s.H));
    cuda::launch(kda_intra<kSplit>, g1, kThreads, static_cast<int>(sizeof(Smem)), d,
                 a.host_array(chunks.data(), chunks.size()), dims, Vp, vec, wsp);
    check_launch("kda_intra");
    const dim3 g2(static_cast<unsigned>(runs.size() * (Vp / kVS)), static_cast<unsigned>(s.H));
    const Run* druns = a.host_array(runs.data(), runs.size());
    if (state_warps() == 8) {
      cuda::launch(kda_state<kSplit, 8>, g2, 256, static_cast<int>(sizeof(StateSmemOf<kSplit>)),
                   druns, dims, Vp, wsp, o);
    } else {
      cuda::launch(kda_state<kSplit, 16>, g2, 512, static_cast<int>(sizeof(StateSmemOf<kSplit>)),
                   druns, dims, Vp, wsp, o);
    }
    check_launch("kda_state");
  }
}

void launch_split(Args& a, const KdaInputs& d, const std::vector<Seg>& segs, KdaShape s, bool tf32,
                  float* o) {
  if (tf32) {
    launch_split_as<false>(a, d, segs, s, o);
  } else {
    launch_split_as<true>(a, d, segs, s, o);
  }
}
