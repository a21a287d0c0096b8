// The body of the chunked KDA kernel (kda_chunked.cu), included once per block size: the
// including namespace defines kThreads (256 or 512) and the constants and types before it.
constexpr int kWarps = kThreads / 32;
// Warp tiles of the [kC, kVT] products: rows 16·(warp % 4) (sub-chunk rb), kNT n8 tiles.
constexpr int kNT = kVT / 8 / (kWarps / 4);
// ... and of the state update [kKP, kVT]: kMS m16 tiles × 4 n8 tiles.
constexpr int kMS = kKP / 16 / (kWarps / 2);
static_assert(kNT >= 1 && kMS >= 1, "warp tiling");
// Row strides in floats: ≡ 4 (mod 32) for operands read as A fragments (row g, column t),
// ≡ 8 (mod 32) for those read as B fragments (row t, column g): no bank conflicts.
constexpr int kLdQ = kKP + 4;  // q, k, G: [kC][kLdQ]
constexpr int kLdS = kVT + 8;  // S [kKP][kLdS]; R, Ṽ [kC][kLdS]
constexpr int kLdA = kC + 4;   // A_qk, Tinv, A_kk [kC][kLdA]

struct Smem {
  float S[kKP * kLdS];
  float q[kC * kLdQ];   // q, then q ⊙ e^Γ
  float k[kC * kLdQ];   // k, then k ⊙ e^{Γ_n−Γ}
  float G[kC * kLdQ];   // Γ, then −β k ⊙ e^Γ
  float R[kC * kLdS];   // β v, then R
  float Vn[kC * kLdS];  // A_kk (until Tinv is made), then Ṽ
  float Aqk[kC * kLdA], Tinv[kC * kLdA];
  __nv_bfloat16 Glo[kC * kKP];                   // Γ − G (the low part of Γ)
  float X[3 * kSub * kSub];                      // the inverse's off-diagonal products
  float beta[kC], gn[kKP], gnlo[kKP], egn[kKP];  // β; Γ_n (hi, lo) and e^{Γ_n}
  int spread[kC / kSub];  // per sub-chunk: max over channels of Γ_a0 − Γ_a1−1 (float bits)
};
static_assert(kC * kLdA <= kC * kLdS, "A_kk lives in the Ṽ buffer");
static_assert(sizeof(Smem) <= 227 * 1024, "one block per SM: 227 KB of shared memory");

__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(x));
  const float r = x - __uint_as_float(hi);
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(r));
}

__device__ __forceinline__ void mma8(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A tf32 operand: split hi + lo (kSplit: fp32-grade products) or rounded once.
template <bool kSplit>
__device__ __forceinline__ void to_tf32(float x, uint32_t& hi, uint32_t& lo) {
  if constexpr (kSplit) {
    split_tf32(x, hi, lo);
  } else {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(x));
    lo = 0;
  }
}

// c += a · b: hi·hi + hi·lo + lo·hi (kSplit), else hi·hi alone.
template <bool kSplit>
__device__ __forceinline__ void mma_parts(float* c, const uint32_t* ah, const uint32_t* al,
                                          const uint32_t* bh, const uint32_t* bl) {
  if constexpr (kSplit) {
    mma8(c, ah, bl);
    mma8(c, al, bh);
  }
  mma8(c, ah, bh);
}

// One k-step of 8: acc[mt][nt] += A[m0+16mt …, k … k+8) · B[k … k+8, n0+8nt …) with the
// operands split hi + lo (kSplit) or rounded to tf32 once. a(r, c) / b(r, c) read the
// operands (they may compute them).
template <bool kSplit, int MT, int NT, typename FA, typename FB>
__device__ __forceinline__ void mma_step(float (&acc)[MT][NT][4], const FA& a, const FB& b, int m0,
                                         int n0, int k) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint32_t ah[MT][4], al[MT][4], bh[NT][2], bl[NT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int r = m0 + 16 * mt + g;
    to_tf32<kSplit>(a(r, k + t), ah[mt][0], al[mt][0]);
    to_tf32<kSplit>(a(r + 8, k + t), ah[mt][1], al[mt][1]);
    to_tf32<kSplit>(a(r, k + t + 4), ah[mt][2], al[mt][2]);
    to_tf32<kSplit>(a(r + 8, k + t + 4), ah[mt][3], al[mt][3]);
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int n = n0 + 8 * nt + g;
    to_tf32<kSplit>(b(k + t, n), bh[nt][0], bl[nt][0]);
    to_tf32<kSplit>(b(k + t + 4, n), bh[nt][1], bl[nt][1]);
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) mma_parts<kSplit>(acc[mt][nt], ah[mt], al[mt], bh[nt], bl[nt]);
  }
}

template <bool kSplit, int MT, int NT, typename FA, typename FB>
__device__ __forceinline__ void warp_mma(float (&acc)[MT][NT][4], const FA& a, const FB& b, int m0,
                                         int n0, int k0, int k1) {
  for (int k = k0; k < k1; k += 8) mma_step<kSplit>(acc, a, b, m0, n0, k);
}

// Visits the accumulator elements: f(mt, nt, e, row, col).
template <int MT, int NT, typename F>
__device__ __forceinline__ void for_acc(int m0, int n0, F&& f) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        f(mt, nt, e, m0 + 16 * mt + g + 8 * (e / 2), n0 + 8 * nt + 2 * t + e % 2);
    }
  }
}

struct Dims {
  int H, K, V;
};

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(ok ? 16 : 0));  // src-size 0: 16 zero bytes
}

// Loads value columns [j0, j0 + kVT) of the chunk's rows [t, t+n) into R (zeros past n and V).
// `vec`: V a multiple of 4 and 16-byte aligned rows, the copies in flight at once (cp.async,
// waited for here with any the caller issued before).
__device__ void load_values(Smem& sm, const KdaInputs& in, Dims d, int64_t t, int n, int h, int j0,
                            bool vec) {
  const int tid = threadIdx.x;
  if (vec) {
    for (int e = tid; e < kC * kVT / 4; e += kThreads) {
      const int r = e / (kVT / 4), j = e % (kVT / 4) * 4;
      const bool ok = r < n && j0 + j < d.V;
      cp_async16(sm.R + r * kLdS + j, in.v + (ok ? ((t + r) * d.H + h) * d.V + j0 + j : 0), ok);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_all;\n" ::);
    return;
  }
  for (int e = tid; e < kC * kVT; e += kThreads) {
    const int r = e / kVT, j = e % kVT;
    const bool ok = r < n && j0 + j < d.V;
    sm.R[r * kLdS + j] = ok ? in.v[((t + r) * d.H + h) * d.V + j0 + j] : 0.0f;
  }
}

// Loads the chunk's rows [t, t+n) raw (zeros past n and past K / V): q, k, g (into G), β, v
// (into R, columns [j0, j0 + kVT)). `vec`: K and V multiples of 4 and 16-byte aligned rows.
__device__ void load_chunk(Smem& sm, const KdaInputs& in, Dims d, int64_t t, int n, int h, int j0,
                           bool vec) {
  const int tid = threadIdx.x;
  if (tid < kC) sm.beta[tid] = tid < n ? in.beta[(t + tid) * d.H + h] : 0.0f;
  if (tid < kC / kSub) sm.spread[tid] = 0;
  if (vec) {
    for (int e = tid; e < kC * kKP / 4; e += kThreads) {
      const int r = e / (kKP / 4), i = e % (kKP / 4) * 4;
      const bool ok = r < n && i < d.K;
      const int64_t gi = ok ? ((t + r) * d.H + h) * d.K + i : 0;
      cp_async16(sm.q + r * kLdQ + i, in.q + gi, ok);
      cp_async16(sm.k + r * kLdQ + i, in.k + gi, ok);
      cp_async16(sm.G + r * kLdQ + i, in.g + gi, ok);
    }
  } else {
    for (int e = tid; e < kC * kKP; e += kThreads) {
      const int r = e / kKP, i = e % kKP;
      const bool ok = r < n && i < d.K;
      const int64_t gi = ((t + r) * d.H + h) * d.K + i;
      sm.q[r * kLdQ + i] = ok ? in.q[gi] : 0.0f;
      sm.k[r * kLdQ + i] = ok ? in.k[gi] : 0.0f;
      sm.G[r * kLdQ + i] = ok ? in.g[gi] : 0.0f;
    }
  }
  load_values(sm, in, d, t, n, h, j0, vec);
}

// Γ = cumsum g in double (as the CPU form), kept as float hi (G) + bf16 lo (Glo): differences
// of two Γ keep ~32 bits however large Γ grows (g down to −40 makes |Γ| ~ 2500 in a chunk,
// where plain fp32 would leave e^{Γ_r−Γ_s} with a 1e-4 error). Thread: one channel, one half
// of the rows. Then Γ_n, e^{Γ_n} and each sub-chunk's decay spread.
__device__ void gamma_cumsum(Smem& sm) {
  constexpr int kParts = kThreads / kKP, kRows = kC / kParts;
  const int tid = threadIdx.x, i = tid % kKP, part = tid / kKP, r0 = part * kRows;
  auto put = [&](int r, double x) {
    const float hi = static_cast<float>(x);
    sm.G[r * kLdQ + i] = hi;
    sm.Glo[r * kKP + i] = __float2bfloat16(static_cast<float>(x - hi));
  };
  auto get = [&](int r) {
    return static_cast<double>(sm.G[r * kLdQ + i]) + __bfloat162float(sm.Glo[r * kKP + i]);
  };
  double acc = 0;
  for (int r = r0; r < r0 + kRows; ++r) {
    acc += sm.G[r * kLdQ + i];
    put(r, acc);
  }
  __syncthreads();
  double base = 0;  // the earlier parts' sums
  for (int u = 0; u < part; ++u) base += get((u + 1) * kRows - 1);
  __syncthreads();
  if (part > 0) {
    for (int r = r0; r < r0 + kRows; ++r) put(r, get(r) + base);
  }
  if (part == kParts - 1) {
    sm.gn[i] = sm.G[(kC - 1) * kLdQ + i];
    sm.gnlo[i] = __bfloat162float(sm.Glo[(kC - 1) * kKP + i]);
    sm.egn[i] = __expf(sm.gn[i]);
  }
  __syncthreads();
  if (tid < kKP) {
    for (int a = 0; a < kC / kSub; ++a) {
      const float sp = sm.G[a * kSub * kLdQ + i] - sm.G[(a * kSub + kSub - 1) * kLdQ + i];
      atomicMax(&sm.spread[a], __float_as_int(fmaxf(sp, 0.0f)));  // ≥ 0: int order = float order
    }
  }
}

// Γ_r − Γ_s on channel i.
__device__ __forceinline__ float gdiff(const Smem& sm, int r, int s, int i) {
  return (sm.G[r * kLdQ + i] - sm.G[s * kLdQ + i]) +
         (__bfloat162float(sm.Glo[r * kKP + i]) - __bfloat162float(sm.Glo[s * kKP + i]));
}

// e^{±80} is a normal float: a sub-chunk whose decay spread stays under it is factorised.
constexpr float kMaxSpread = 80.0f;

__device__ __forceinline__ bool factorised(const Smem& sm, int a) {
  return __int_as_float(sm.spread[a]) <= kMaxSpread;
}

// A_kk and A_qk on the tensor cores: rows of sub-chunk a, columns s < a0 + 16, as
// (x_r e^{Γ_r−Γ_a0}) · (k_s e^{Γ_a0−Γ_s}). Both factors ≤ 1 for s < a0; inside the diagonal
// block the second is ≤ e^{spread}, so a diagonal block is done here only when its sub-chunk
// is factorised (else by a_diag). Task (a, p): the 16×16 column block p ≤ a of sub-chunk a
// (10 tasks); per k-step one exp serves k_r and q_r, one serves both products' B operand.
template <bool kSplit>
__device__ void a_tiles(Smem& sm) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int task = warp; task < 10; task += kThreads / 32) {
    const int a = task < 1 ? 0 : task < 3 ? 1 : task < 6 ? 2 : 3;
    const int p = task - (a == 0 ? 0 : a == 1 ? 1 : a == 2 ? 3 : 6), a0 = kSub * a;
    if (p == a && !factorised(sm, a)) continue;
    float akk[2][4] = {}, aqk[2][4] = {};
    for (int k0 = 0; k0 < kKP; k0 += 8) {
      uint32_t kh[4], kl[4], qh[4], ql[4], bh[2][2], bl[2][2];
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // A fragment element e: row g (+8), column t (+4)
        const int r = a0 + g + 8 * (e % 2), i = k0 + t + 4 * (e / 2);
        const float x = __expf(gdiff(sm, r, a0, i));
        to_tf32<kSplit>(sm.k[r * kLdQ + i] * x, kh[e], kl[e]);
        to_tf32<kSplit>(sm.q[r * kLdQ + i] * x, qh[e], ql[e]);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {  // B fragment: row t (+4), column g
          const int s = kSub * p + 8 * nt + g, i = k0 + t + 4 * e;
          to_tf32<kSplit>(sm.k[s * kLdQ + i] * __expf(gdiff(sm, a0, s, i)), bh[nt][e], bl[nt][e]);
        }
        mma_parts<kSplit>(akk[nt], kh, kl, bh[nt], bl[nt]);
        mma_parts<kSplit>(aqk[nt], qh, ql, bh[nt], bl[nt]);
      }
    }
    for_acc<1, 2>(0, kSub * p, [&](int, int nt, int e, int r, int s) {
      const int row = a0 + r;
      sm.Vn[row * kLdA + s] = s < row ? akk[nt][e] : 0.0f;
      sm.Aqk[row * kLdA + s] = s <= row ? aqk[nt][e] : 0.0f;
    });
  }
}

// Diagonal blocks of sub-chunks too strong to factorise, one exp per pair and channel: a warp
// per row, lanes over the channels.
__device__ void a_diag(Smem& sm) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < kC; r += kThreads / 32) {
    const int a0 = r / kSub * kSub;
    if (factorised(sm, r / kSub)) continue;
    const float* kr = sm.k + r * kLdQ;
    const float* qr = sm.q + r * kLdQ;
    for (int s = a0; s < a0 + kSub; ++s) {
      float kk = 0, qk = 0;
      if (s <= r) {
        const float* ks = sm.k + s * kLdQ;
#pragma unroll
        for (int i = lane; i < kKP; i += 32) {
          const float x = ks[i] * __expf(gdiff(sm, r, s, i));
          kk += kr[i] * x;
          qk += qr[i] * x;
        }
#pragma unroll
        for (int m = 16; m >= 1; m /= 2) {
          kk += __shfl_xor_sync(0xffffffffu, kk, m);
          qk += __shfl_xor_sync(0xffffffffu, qk, m);
        }
      }
      if (lane == 0) {
        sm.Vn[r * kLdA + s] = s < r ? kk : 0.0f;
        sm.Aqk[r * kLdA + s] = qk;  // zero above the diagonal
      }
    }
  }
}

// Inverses of the diagonal 16×16 blocks of I + Diag(β) A_kk by substitution: 4 threads per
// column (adjacent lanes), rows in order.
__device__ void inverse_diag(Smem& sm) {
  if (threadIdx.x >= 256) return;  // 4 blocks × 16 columns × 4 threads
  const int tid = threadIdx.x, p = tid % 4, c = (tid / 4) % kSub, a0 = tid / 64 * kSub;
  const int col = a0 + c;
  const float* A = sm.Vn;
  float* T = sm.Tinv;
  if (p == 0) {
    for (int r = 0; r < kSub; ++r) T[(a0 + r) * kLdA + col] = r == c ? 1.0f : 0.0f;
  }
  __syncwarp();
  for (int r = 1; r < kSub; ++r) {
    float s = 0;
    for (int m = c + p; m < r; m += 4) s += A[(a0 + r) * kLdA + a0 + m] * T[(a0 + m) * kLdA + col];
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    if (p == 0 && r > c) T[(a0 + r) * kLdA + col] = -sm.beta[a0 + r] * s;
    __syncwarp();
  }
}

// The off-diagonal blocks of Tinv, by distance d from the diagonal:
//   T_ab = −T_aa Σ_{c=b}^{a−1} Diag(β_a) A_ac T_cb   (b = a − d).
__device__ void inverse_offdiag(Smem& sm) {
  const int i = threadIdx.x / kSub, j = threadIdx.x % kSub;
  const float* A = sm.Vn;
  float* T = sm.Tinv;
  const bool on = threadIdx.x < kSub * kSub;  // one thread per block element
  for (int d = 1; d < kC / kSub; ++d) {
    for (int a = d; a < kC / kSub && on; ++a) {
      const int b = a - d, r = a * kSub + i;
      float x[4] = {};  // four independent chains
      for (int m = b * kSub; m < a * kSub; m += 4) {
#pragma unroll
        for (int u = 0; u < 4; ++u) x[u] += A[r * kLdA + m + u] * T[(m + u) * kLdA + b * kSub + j];
      }
      sm.X[(a - d) * kSub * kSub + i * kSub + j] = sm.beta[r] * ((x[0] + x[1]) + (x[2] + x[3]));
    }
    __syncthreads();
    for (int a = d; a < kC / kSub && on; ++a) {
      const int b = a - d, r = a * kSub + i;
      const float* X = sm.X + (a - d) * kSub * kSub;
      float y[4] = {};
#pragma unroll
      for (int m = 0; m < kSub; m += 4) {
#pragma unroll
        for (int u = 0; u < 4; ++u) y[u] += T[r * kLdA + a * kSub + m + u] * X[(m + u) * kSub + j];
      }
      T[r * kLdA + b * kSub + j] = -((y[0] + y[1]) + (y[2] + y[3]));
    }
    __syncthreads();
  }
}

// q ← q ⊙ e^Γ, G ← −β k ⊙ e^Γ, k ← k ⊙ e^{Γ_n−Γ}.
__device__ void gate_rows(Smem& sm) {
  for (int e = threadIdx.x; e < kC * kKP; e += kThreads) {
    const int r = e / kKP, i = e % kKP, x = r * kLdQ + i;
    const float G = sm.G[x], e1 = __expf(G),
                e2 = __expf((sm.gn[i] - G) + (sm.gnlo[i] - __bfloat162float(sm.Glo[r * kKP + i])));
    const float kv = sm.k[x];
    sm.q[x] *= e1;
    sm.G[x] = -sm.beta[r] * kv * e1;
    sm.k[x] = kv * e2;
  }
}

// Everything of a loaded chunk that needs no state: Γ, A_kk and A_qk, Tinv; then q ← q e^Γ,
// G ← −β k e^Γ, k ← k e^{Γ_n−Γ}. Starts and ends with a barrier.
template <bool kSplit>
__device__ void chunk_algebra(Smem& sm) {
  __syncthreads();
  gamma_cumsum(sm);
  __syncthreads();
  a_tiles<kSplit>(sm);
  a_diag(sm);
  __syncthreads();
  inverse_diag(sm);
  gate_rows(sm);
  __syncthreads();
  inverse_offdiag(sm);  // ends with a barrier
}

template <bool kSplit>
__global__ void __launch_bounds__(kThreads, 1)
    kda_chunks(const KdaInputs in, const Seg* segs, Dims d, bool vec, float* o) {
  extern __shared__ float4 smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const int vtiles = (d.V + kVT - 1) / kVT;
  const int h = blockIdx.y, j0 = static_cast<int>(blockIdx.x % vtiles) * kVT;
  const Seg seg = segs[blockIdx.x / vtiles];
  const int tid = threadIdx.x, warp = tid / 32;
  float* Sg = seg.S + static_cast<int64_t>(h) * d.K * d.V;
  for (int e = tid; e < kKP * kVT; e += kThreads) {
    const int i = e / kVT, j = e % kVT;
    sm.S[i * kLdS + j] =
        i < d.K && j0 + j < d.V ? Sg[static_cast<int64_t>(i) * d.V + j0 + j] : 0.0f;
  }
  // Warp tiles: rows 16·(warp % 4) of the chunk (its sub-chunk rb), 8·kNT value columns.
  const int rb = warp % 4, m0 = kSub * rb, n0 = 8 * kNT * (warp / 4);
  for (int64_t c0 = 0; c0 < seg.n; c0 += kC) {
    const int n = seg.n - c0 < kC ? static_cast<int>(seg.n - c0) : kC;
    const int64_t t = seg.t0 + c0;
    __syncthreads();  // the previous chunk is done with every buffer
    load_chunk(sm, in, d, t, n, h, j0, vec);
    chunk_algebra<kSplit>(sm);
    {  // R = β V + (−β k e^Γ) S, in place (v raw in R until here)
      float acc[1][kNT][4];
      for_acc<1, kNT>(m0, n0, [&](int, int nt, int e, int r, int j) {
        acc[0][nt][e] = sm.beta[r] * sm.R[r * kLdS + j];
      });
      warp_mma<kSplit>(
          acc, [&](int r, int i) { return sm.G[r * kLdQ + i]; },
          [&](int i, int j) { return sm.S[i * kLdS + j]; }, m0, n0, 0, kKP);
      for_acc<1, kNT>(
          m0, n0, [&](int, int nt, int e, int r, int j) { sm.R[r * kLdS + j] = acc[0][nt][e]; });
    }
    __syncthreads();
    {  // Ṽ = Tinv R (block lower triangular: sub-chunk rb needs columns < 16 (rb + 1))
      float acc[1][kNT][4] = {};
      warp_mma<kSplit>(
          acc, [&](int r, int s) { return sm.Tinv[r * kLdA + s]; },
          [&](int s, int j) { return sm.R[s * kLdS + j]; }, m0, n0, 0, m0 + kSub);
      for_acc<1, kNT>(
          m0, n0, [&](int, int nt, int e, int r, int j) { sm.Vn[r * kLdS + j] = acc[0][nt][e]; });
    }
    __syncthreads();
    {  // O = (q e^Γ) S + A_qk Ṽ
      float acc[1][kNT][4] = {};
      warp_mma<kSplit>(
          acc, [&](int r, int i) { return sm.q[r * kLdQ + i]; },
          [&](int i, int j) { return sm.S[i * kLdS + j]; }, m0, n0, 0, kKP);
      warp_mma<kSplit>(
          acc, [&](int r, int s) { return sm.Aqk[r * kLdA + s]; },
          [&](int s, int j) { return sm.Vn[s * kLdS + j]; }, m0, n0, 0, m0 + kSub);
      for_acc<1, kNT>(m0, n0, [&](int, int nt, int e, int r, int j) {
        if (r < n && j0 + j < d.V) o[((t + r) * d.H + h) * d.V + j0 + j] = acc[0][nt][e];
      });
    }
    __syncthreads();  // S is read above
    {  // S ← Diag(e^{Γ_n}) S + (k e^{Γ_n−Γ})ᵀ Ṽ: warp tile 16·kMS rows × 32 columns
      const int i0 = 16 * kMS * (warp % (kWarps / 2)), j1 = 32 * (warp / (kWarps / 2));
      float acc[kMS][4][4];
      for_acc<kMS, 4>(i0, j1, [&](int mt, int nt, int e, int i, int j) {
        acc[mt][nt][e] = sm.egn[i] * sm.S[i * kLdS + j];
      });
      warp_mma<kSplit>(
          acc, [&](int i, int r) { return sm.k[r * kLdQ + i]; },
          [&](int r, int j) { return sm.Vn[r * kLdS + j]; }, i0, j1, 0, kC);
      for_acc<kMS, 4>(i0, j1, [&](int mt, int nt, int e, int i, int j) {
        sm.S[i * kLdS + j] = acc[mt][nt][e];
      });
    }
  }
  __syncthreads();
  for (int e = tid; e < kKP * kVT; e += kThreads) {
    const int i = e / kVT, j = e % kVT;
    if (i < d.K && j0 + j < d.V) Sg[static_cast<int64_t>(i) * d.V + j0 + j] = sm.S[i * kLdS + j];
  }
}

template <bool kSplit>
void launch_chunks_as(const KdaInputs& d, const Seg* dsegs, int64_t n_segs, KdaShape s, float* o) {
  const int smem = static_cast<int>(sizeof(Smem));
  static bool configured = false;
  if (!configured) {
    cuda::check_cuda(
        cudaFuncSetAttribute(kda_chunks<kSplit>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
        "kda_chunked smem attribute");
    configured = true;
  }
  const int64_t vtiles = (s.V + kVT - 1) / kVT;
  check(n_segs * vtiles < (int64_t{1} << 31) && s.H <= 65535, "kda_chunked (cuda): grid too large");
  const dim3 grid(static_cast<unsigned>(n_segs * vtiles), static_cast<unsigned>(s.H));
  const Dims dims{static_cast<int>(s.H), static_cast<int>(s.K), static_cast<int>(s.V)};
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = s.K % 4 == 0 && s.V % 4 == 0 && al(d.q) && al(d.k) && al(d.g) && al(d.v);
  cuda::launch(kda_chunks<kSplit>, grid, kThreads, smem, d, dsegs, dims, vec, o);
  check_launch("kda_chunked");
}

// tf32: every product from operands rounded to tf32 once (bf16 precision), else fp32-grade.
void launch_chunks(const KdaInputs& d, const Seg* dsegs, int64_t n_segs, KdaShape s, bool tf32,
                   float* o) {
  if (tf32) {
    launch_chunks_as<false>(d, dsegs, n_segs, s, o);
  } else {
    launch_chunks_as<true>(d, dsegs, n_segs, s, o);
  }
}
