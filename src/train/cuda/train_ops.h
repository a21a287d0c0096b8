// The device (CUDA) kernels of the training pass, as plain C++ launchers (no CUDA headers):
// every pointer is device memory unless its comment says host, every launcher queues its work
// on the CUDA backend's stream (backend/cuda/runtime.cuh) and returns without waiting, and every
// backward ADDS into its gradients, as the CPU `bwd` slots do (ops/*/…_bwd.cpp), with the same
// maths. Each one is tested against the CPU op it mirrors (tests/train/test_train_cuda_*.cpp).
//
// Rows: the step's windows are batched, B windows of T tokens each, stored as rows b·T + t.
// Row-wise ops take rows = B·T; sequence ops (conv, KDA, attention) take B and T.
//
// Determinism: no atomics on float. A gradient summed over rows (a norm's weight, a conv's
// taps, a gate's biases) is summed by colsum_add in a fixed order, so a step gives the same
// bits on every run (a training run resumes bit-exactly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "ops/moe/router.h"
#include "ops/situ/situ.h"

namespace k3::train::gpu {

// ---- memory (train_mem.cu) -------------------------------------------------------------
bool available();               // a device is usable (false without one, never a throw)
void* dev_alloc(size_t bytes);  // throws k3::Error naming the size when the device is full
void dev_free(void* p);
void to_dev(void* dst, const void* host, size_t bytes);   // waits for the copy
void to_host(void* host, const void* src, size_t bytes);  // waits for the stream, then copies
void dev_zero(void* p, size_t bytes);                     // queued
void dev_copy(void* dst, const void* src, size_t bytes);  // device to device, queued
void sync();                                              // waits for the stream
// Page-locked host memory, which the copies move at the link's full rate (pageable memory
// goes through a driver bounce buffer); falls back to plain memory when none is granted.
void* host_alloc_pinned(size_t bytes);
void host_free_pinned(void* p);

// An owned device array of floats (or of other trivially copyable T), zeroed on creation
// unless asked not to be.
template <typename T = float>
class DevArray {
 public:
  DevArray() = default;
  // zeroed = false leaves the contents undefined (a buffer the next launch overwrites whole).
  explicit DevArray(int64_t n, bool zeroed = true) : n_(n) {
    if (n > 0) {
      p_ = static_cast<T*>(dev_alloc(bytes()));
      if (zeroed) dev_zero(p_, bytes());
    }
  }
  ~DevArray() { dev_free(p_); }
  DevArray(DevArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DevArray& operator=(DevArray&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  DevArray(const DevArray&) = delete;
  DevArray& operator=(const DevArray&) = delete;
  T* data() { return p_; }
  const T* data() const { return p_; }
  int64_t size() const { return n_; }
  size_t bytes() const { return static_cast<size_t>(n_) * sizeof(T); }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
};
using DevBuf = DevArray<float>;

// An owned page-locked host array of floats (the staging of the per-step copies).
class PinnedBuf {
 public:
  PinnedBuf() = default;
  explicit PinnedBuf(int64_t n)
      : p_(n > 0 ? static_cast<float*>(host_alloc_pinned(static_cast<size_t>(n) * sizeof(float)))
                 : nullptr),
        n_(n) {}
  ~PinnedBuf() { host_free_pinned(p_); }
  PinnedBuf(PinnedBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  PinnedBuf& operator=(PinnedBuf&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  PinnedBuf(const PinnedBuf&) = delete;
  PinnedBuf& operator=(const PinnedBuf&) = delete;
  float* data() { return p_; }
  const float* data() const { return p_; }
  int64_t size() const { return n_; }

 private:
  float* p_ = nullptr;
  int64_t n_ = 0;
};

// ---- dense algebra (train_linear.cu; cuBLAS in fp32) ------------------------------------
// y [N, out] = x [N, in] · Wᵀ with W [out, in] (row-major, the checkpoint's layout).
void linear_fwd(const float* x, int64_t N, const float* W, int64_t out, int64_t in, float* y);
// dW [out, in] += dyᵀ · x; dx [N, in] += dy · W when dx is not null.
void linear_bwd(const float* x, int64_t N, const float* W, int64_t out, int64_t in, const float* dy,
                float* dx, float* dW);
// out [n] += Σ_r m[r, n] over rows r = 0 … rows-1, in a fixed order.
void colsum_add(const float* m, int64_t rows, int64_t n, float* out);

// ---- Muon's orthogonalisation (train_ns.cu) ----------------------------------------------
// train/newton_schulz.h's iteration X <- a X + (b A + c A²) X, A = X Xᵀ, on nb matrices of one
// shape at once: g, out [nb, rows, cols]; out may not alias g. Each matrix is scaled to unit
// Frobenius norm first (a zero matrix gives zeros).
void newton_schulz_batch(const float* g, float* out, int64_t nb, int64_t rows, int64_t cols,
                         int steps, float a, float b, float c);

// ---- data movement (train_misc.cu) ----------------------------------------------------------
// dst[r, c] += src[r, c] for r < rows, c < cols, with row strides src_ld and dst_ld (slices of
// wider rows: MLA's latent and rope parts, a head's columns).
void add_strided(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                 int64_t cols);
// The same as a copy (dst's slice overwritten).
void copy_strided(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                  int64_t cols);
void mul_fwd(const float* a, const float* b, int64_t n, float* y);  // y = a ⊙ b
// da += dy ⊙ b, db += dy ⊙ a.
void mul_bwd(const float* a, const float* b, int64_t n, const float* dy, float* da, float* db);

// ---- row-wise ops (train_rowwise.cu) -------------------------------------------------------
// The maths of ops/norm/norm.h: x, z, y [rows, n]; w [n].
void rms_norm_fwd(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y);
void rms_norm_bwd(const float* x, int64_t rows, int64_t n, const float* w, float eps,
                  const float* dy, float* dx, float* dw);
void gated_rms_norm_fwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, float* y);
void gated_rms_norm_bwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, const float* dy, float* dx, float* dz, float* dw);
void l2_norm_fwd(const float* x, int64_t rows, int64_t n, float eps, float* y);
void l2_norm_bwd(const float* x, int64_t rows, int64_t n, float eps, const float* dy, float* dx);
// ops/elementwise/elementwise.h, over n values.
void sigmoid_fwd(const float* x, int64_t n, float* y);
void sigmoid_bwd(const float* x, int64_t n, const float* dy, float* dx);
void scale_fwd(const float* x, int64_t n, float s, float* y);  // y may alias x
void add_scaled(const float* x, int64_t n, float s,
                float* y);  // y += s · x (scale's and add's bwd)
void add_fwd(const float* a, const float* b, int64_t n, float* y);  // y may alias a or b
void mul_sigmoid_fwd(const float* x, const float* gate, int64_t n, float* y);
void mul_sigmoid_bwd(const float* x, const float* gate, int64_t n, const float* dy, float* dx,
                     float* dgate);
// ops/situ/situ.h: gate, up, out [n].
void situ_glu_fwd(const float* gate, const float* up, int64_t n, SituParams p, float* out);
void situ_glu_bwd(const float* gate, const float* up, int64_t n, SituParams p, const float* dout,
                  float* dgate, float* dup);
// ops/kda/kda_gate.h: f, g [rows, H, K]; A_log [H]; dt_bias [H, K].
void kda_gate_fwd(const float* f, const float* A_log, const float* dt_bias, int64_t rows, int64_t H,
                  int64_t K, float lower_bound, float* g);
void kda_gate_bwd(const float* f, const float* A_log, const float* dt_bias, int64_t rows, int64_t H,
                  int64_t K, float lower_bound, const float* dg, float* df, float* dA_log,
                  float* ddt_bias);
// ops/loss/cross_entropy.h: logits [rows, V], targets [rows] (int64) -> loss [rows].
void cross_entropy_fwd(const float* logits, const int64_t* targets, int64_t rows, int64_t V,
                       float* loss);
void cross_entropy_bwd(const float* logits, const int64_t* targets, int64_t rows, int64_t V,
                       const float* dloss, float* dlogits);
// ops/embed/embed.h (fp32 table [vocab, d]): out [rows, d] = table[ids]; the backward adds
// dout's rows into dtable in row order (ids int64, each in [0, vocab)).
void embed_fwd(const float* table, const int64_t* ids, int64_t rows, int64_t d, float* out);
void embed_bwd(const int64_t* ids, int64_t rows, int64_t d, int64_t vocab, const float* dout,
               float* dtable);

// ---- sequence ops (train_kda.cu) ---------------------------------------------------------
// ops/conv1d/conv1d.h on each of B windows from an empty history: x, y [B·T, C]; w [C, W].
void conv1d_silu_fwd(const float* x, const float* w, int64_t B, int64_t T, int64_t C, int64_t W,
                     float* y);
void conv1d_silu_bwd(const float* x, const float* w, int64_t B, int64_t T, int64_t C, int64_t W,
                     const float* dy, float* dx, float* dw);
// The KDA delta rule (ops/kda/kda.h) on each of B windows from a zero state: q, k, g
// [B·T, H, K], v [B·T, H, V], beta [B·T, H] -> o [B·T, H, V]. `states` [B, H, T+1, K, V]
// receives S_0 … S_T of every window and head (what the backward reads).
void kda_core_fwd(const float* q, const float* k, const float* v, const float* g, const float* beta,
                  int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, float* states, float* o);
// The recurrent backward (ops/kda/kda_bwd.cpp) from the saved states; adds dq, dk, dv, dg,
// dbeta (none may be null).
void kda_core_bwd(const float* q, const float* k, const float* v, const float* g, const float* beta,
                  int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, const float* states,
                  const float* d_o, float* dq, float* dk, float* dv, float* dg, float* dbeta);

// ---- attention, residual mix and routing (train_attn.cu) --------------------------------
// The expanded causal attention of ops/mla/mla.h on each of B windows (n_past = 0): q, k
// [B·T, H, Dq], v [B·T, H, Dv] -> o [B·T, H, Dv], with the scale the CPU op uses. `probs`
// [B, H, T, T] receives the softmax probabilities (zero above the diagonal) for the backward.
void mla_attention_fwd(const float* q, const float* k, const float* v, int64_t B, int64_t T,
                       int64_t H, int64_t Dq, int64_t Dv, float* probs, float* o);
void mla_attention_bwd(const float* q, const float* k, const float* v, const float* probs,
                       int64_t B, int64_t T, int64_t H, int64_t Dq, int64_t Dv, const float* d_o,
                       float* dq, float* dk, float* dv);
// ops/attn_res/attn_res.h over rows tokens: cands is a HOST array of n device pointers, each
// [rows, d]; w [d] = w_norm ⊙ w_proj (device); out [rows, d].
void attn_res_mix_fwd(const float* const* cands, int64_t n, int64_t rows, int64_t d, const float* w,
                      float eps, float* out);
// Adds dcands[i] (HOST array of device pointers; a null entry skips one) and dw [d].
void attn_res_mix_bwd(const float* const* cands, int64_t n, int64_t rows, int64_t d, const float* w,
                      float eps, const float* dout, float* const* dcands, float* dw);
// ops/moe/router.h: logits [rows, E], bias [E] -> sel [rows, k] (int32), weight [rows, k].
void router_fwd(const float* logits, const float* bias, RouterParams p, int64_t rows, int32_t* sel,
                float* weight);
void router_bwd(const float* logits, const int32_t* sel, RouterParams p, int64_t rows,
                const float* dweight, float* dlogits);
// dst [n, width] = src[rows_idx[i]] (rows_idx int64 [n], device).
void gather_rows_fwd(const float* src, const int64_t* rows_idx, int64_t n, int64_t width,
                     float* dst);
// The routed experts' combine. The n = rows·k choices are grouped by expert: order [n] lists
// flat choice indices (t·k + j) expert by expert, and y [n, width] holds the experts' outputs
// in that order. c [rows, width] += Σ_j weight[t·k + j] · y[pos(t·k + j)], where inv [n] gives
// pos (the position of each flat choice in order), summed over j in order.
void moe_combine_fwd(const float* y, const int64_t* inv, const float* weight, int64_t rows,
                     int64_t k, int64_t width, float* c);
// Adds dy [n, width] (dy[pos(t·k+j)] += weight · dc[t]) and dweight [rows·k] (dc[t] · y).
void moe_combine_bwd(const float* y, const int64_t* inv, const float* weight, int64_t rows,
                     int64_t k, int64_t width, const float* dc, float* dy, float* dweight);
// The gathers' backward: dsrc[t] += Σ_j ddst[pos(t·k + j)] over j in order, for the expert
// inputs gathered as src[order[i] / k] (the same inv as above).
void gather_choices_bwd(const float* ddst, const int64_t* inv, int64_t rows, int64_t k,
                        int64_t width, float* dsrc);

}  // namespace k3::train::gpu
