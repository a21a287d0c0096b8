// Host stand-ins for the device training kernels (src/train/cuda/train_ops.h) built from the
// CPU ops, for test_train_emu (emu_test.cpp): plain loops, double sums where the op has none.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops/attn_res/attn_res.h"
#include "ops/conv1d/conv1d.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embed/embed.h"
#include "ops/kda/kda.h"
#include "ops/kda/kda_gate.h"
#include "ops/linear/linear.h"
#include "ops/loss/cross_entropy.h"
#include "ops/mla/mla.h"
#include "ops/moe/router.h"
#include "ops/norm/norm.h"
#include "ops/situ/situ.h"
#include "train/cuda/train_ops.h"
#include "train/newton_schulz.h"

namespace k3::train::gpu {
bool available() { return true; }
void* dev_alloc(size_t b) { return std::malloc(b ? b : 1); }
void dev_free(void* p) { std::free(p); }
void to_dev(void* d, const void* h, size_t b) {
  if (b) std::memcpy(d, h, b);
}
void to_host(void* h, const void* d, size_t b) {
  if (b) std::memcpy(h, d, b);
}
void dev_zero(void* p, size_t b) {
  if (b) std::memset(p, 0, b);
}
void dev_copy(void* d, const void* s, size_t b) {
  if (b) std::memmove(d, s, b);
}
void sync() {}
void* host_alloc_pinned(size_t b) { return std::malloc(b ? b : 1); }
void host_free_pinned(void* p) { std::free(p); }
void newton_schulz_batch(const float* g, float* out, int64_t nb, int64_t rows, int64_t cols,
                         int steps, float a, float b, float c) {
  for (int64_t i = 0; i < nb; ++i) {
    k3::train::newton_schulz(g + i * rows * cols, out + i * rows * cols, rows, cols, steps,
                             {a, b, c});
  }
}
void linear_fwd(const float* x, int64_t N, const float* W, int64_t out, int64_t in, float* y) {
  for (int64_t r = 0; r < N; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += double(x[r * in + i]) * W[o * in + i];
      y[r * out + o] = float(s);
    }
}
void linear_bwd(const float* x, int64_t N, const float* W, int64_t out, int64_t in, const float* dy,
                float* dx, float* dW) {
  if (dW)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0;
        for (int64_t r = 0; r < N; ++r) s += double(dy[r * out + o]) * x[r * in + i];
        dW[o * in + i] += float(s);
      }
  if (dx)
    for (int64_t r = 0; r < N; ++r)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0;
        for (int64_t o = 0; o < out; ++o) s += double(dy[r * out + o]) * W[o * in + i];
        dx[r * in + i] += float(s);
      }
}
void colsum_add(const float* m, int64_t rows, int64_t n, float* out) {
  for (int64_t c = 0; c < n; ++c) {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) s += m[r * n + c];
    out[c] += float(s);
  }
}
void add_strided(const float* src, int64_t sl, float* dst, int64_t dl, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * dl + c] += src[r * sl + c];
}
void copy_strided(const float* src, int64_t sl, float* dst, int64_t dl, int64_t rows,
                  int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * dl + c] = src[r * sl + c];
}
void mul_fwd(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
void mul_bwd(const float* a, const float* b, int64_t n, const float* dy, float* da, float* db) {
  for (int64_t i = 0; i < n; ++i) {
    if (da) da[i] += dy[i] * b[i];
    if (db) db[i] += dy[i] * a[i];
  }
}
void rms_norm_fwd(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y) {
  k3::rms_norm(x, rows, n, w, eps, y);
}
void rms_norm_bwd(const float* x, int64_t rows, int64_t n, const float* w, float eps,
                  const float* dy, float* dx, float* dw) {
  k3::rms_norm_bwd(x, rows, n, w, eps, dy, dx, dw);
}
void gated_rms_norm_fwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, float* y) {
  k3::gated_rms_norm(x, z, rows, n, w, eps, y);
}
void gated_rms_norm_bwd(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                        float eps, const float* dy, float* dx, float* dz, float* dw) {
  k3::gated_rms_norm_bwd(x, z, rows, n, w, eps, dy, dx, dz, dw);
}
void l2_norm_fwd(const float* x, int64_t rows, int64_t n, float eps, float* y) {
  k3::l2_norm(x, rows, n, eps, y);
}
void l2_norm_bwd(const float* x, int64_t rows, int64_t n, float eps, const float* dy, float* dx) {
  k3::l2_norm_bwd(x, rows, n, eps, dy, dx);
}
void sigmoid_fwd(const float* x, int64_t n, float* y) { k3::sigmoid_f32(x, n, y); }
void sigmoid_bwd(const float* x, int64_t n, const float* dy, float* dx) {
  k3::sigmoid_bwd(x, n, dy, dx);
}
void scale_fwd(const float* x, int64_t n, float s, float* y) { k3::scale_f32(x, n, s, y); }
void add_scaled(const float* x, int64_t n, float s, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * x[i];
}
void add_fwd(const float* a, const float* b, int64_t n, float* y) { k3::add_f32(a, b, n, y); }
void mul_sigmoid_fwd(const float* x, const float* g, int64_t n, float* y) {
  k3::mul_sigmoid_f32(x, g, n, y);
}
void mul_sigmoid_bwd(const float* x, const float* g, int64_t n, const float* dy, float* dx,
                     float* dg) {
  k3::mul_sigmoid_bwd(x, g, n, dy, dx, dg);
}
void situ_glu_fwd(const float* g, const float* u, int64_t n, SituParams p, float* o) {
  k3::situ_glu(g, u, n, p, o);
}
void situ_glu_bwd(const float* g, const float* u, int64_t n, SituParams p, const float* d,
                  float* dg, float* du) {
  k3::situ_glu_bwd(g, u, n, p, d, dg, du);
}
void kda_gate_fwd(const float* f, const float* A, const float* dt, int64_t rows, int64_t H,
                  int64_t K, float lb, float* g) {
  k3::kda_gate(f, A, dt, {rows, H, K, lb}, g);
}
void kda_gate_bwd(const float* f, const float* A, const float* dt, int64_t rows, int64_t H,
                  int64_t K, float lb, const float* dg, float* df, float* dA, float* ddt) {
  k3::kda_gate_bwd(f, A, dt, {rows, H, K, lb}, dg, df, dA, ddt);
}
void cross_entropy_fwd(const float* l, const int64_t* t, int64_t rows, int64_t V, float* loss) {
  k3::cross_entropy(l, t, rows, V, loss);
}
void cross_entropy_bwd(const float* l, const int64_t* t, int64_t rows, int64_t V, const float* d,
                       float* dl) {
  k3::cross_entropy_bwd(l, t, rows, V, d, dl);
}
void embed_fwd(const float* table, const int64_t* ids, int64_t rows, int64_t d, float* out) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(out + r * d, table + ids[r] * d, d * 4);
}
void embed_bwd(const int64_t* ids, int64_t rows, int64_t d, int64_t, const float* dout, float* dt) {
  k3::embed_rows_bwd(ids, rows, d, dout, dt);
}
void conv1d_silu_fwd(const float* x, const float* w, int64_t B, int64_t T, int64_t C, int64_t W,
                     float* y) {
  for (int64_t b = 0; b < B; ++b) {
    std::vector<float> st(C * (W - 1), 0.f);
    k3::causal_conv1d_silu(x + b * T * C, w, st.data(), {T, C, W}, y + b * T * C);
  }
}
void conv1d_silu_bwd(const float* x, const float* w, int64_t B, int64_t T, int64_t C, int64_t W,
                     const float* dy, float* dx, float* dw) {
  for (int64_t b = 0; b < B; ++b)
    k3::causal_conv1d_silu_bwd(x + b * T * C, w, nullptr, {T, C, W}, dy + b * T * C, dx + b * T * C,
                               dw);
}
void kda_core_fwd(const float* q, const float* k, const float* v, const float* g, const float* beta,
                  int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, float*, float* o) {
  for (int64_t b = 0; b < B; ++b) {
    std::vector<float> S(H * K * V, 0.f);
    const int64_t r = b * T;
    k3::kda_recurrent({q + r * H * K, k + r * H * K, v + r * H * V, g + r * H * K, beta + r * H},
                      {T, H, K, V}, S.data(), o + r * H * V);
  }
}
void kda_core_bwd(const float* q, const float* k, const float* v, const float* g, const float* beta,
                  int64_t B, int64_t T, int64_t H, int64_t K, int64_t V, const float*,
                  const float* d_o, float* dq, float* dk, float* dv, float* dg, float* dbeta) {
  for (int64_t b = 0; b < B; ++b) {
    const int64_t r = b * T;
    k3::kda_recurrent_bwd(
        {q + r * H * K, k + r * H * K, v + r * H * V, g + r * H * K, beta + r * H}, {T, H, K, V},
        nullptr, d_o + r * H * V,
        {dq + r * H * K, dk + r * H * K, dv + r * H * V, dg + r * H * K, dbeta + r * H});
  }
}
void mla_attention_fwd(const float* q, const float* k, const float* v, int64_t B, int64_t T,
                       int64_t H, int64_t Dq, int64_t Dv, float*, float* o) {
  for (int64_t b = 0; b < B; ++b) {
    const int64_t r = b * T;
    k3::mla_attention_expanded(q + r * H * Dq, k + r * H * Dq, v + r * H * Dv,
                               {T, 0, H, Dq, 0, Dv, 0}, o + r * H * Dv);
  }
}
void mla_attention_bwd(const float* q, const float* k, const float* v, const float*, int64_t B,
                       int64_t T, int64_t H, int64_t Dq, int64_t Dv, const float* d_o, float* dq,
                       float* dk, float* dv) {
  for (int64_t b = 0; b < B; ++b) {
    const int64_t r = b * T;
    k3::mla_attention_expanded_bwd(q + r * H * Dq, k + r * H * Dq, v + r * H * Dv,
                                   {T, 0, H, Dq, 0, Dv, 0}, d_o + r * H * Dv, dq + r * H * Dq,
                                   dk + r * H * Dq, dv + r * H * Dv);
  }
}
void attn_res_mix_fwd(const float* const* c, int64_t n, int64_t rows, int64_t d, const float* w,
                      float eps, float* out) {
  k3::attn_res_mix(c, {n, rows, d}, w, eps, out);
}
void attn_res_mix_bwd(const float* const* c, int64_t n, int64_t rows, int64_t d, const float* w,
                      float eps, const float* dout, float* const* dc, float* dw) {
  k3::attn_res_mix_bwd(c, {n, rows, d}, w, eps, dout, dc, dw);
}
void router_fwd(const float* l, const float* b, RouterParams p, int64_t rows, int32_t* sel,
                float* w) {
  k3::route_tokens(l, b, p, rows, sel, w);
}
void router_bwd(const float* l, const int32_t* sel, RouterParams p, int64_t rows, const float* dw,
                float* dl) {
  k3::route_tokens_bwd(l, sel, p, rows, dw, dl);
}
void gather_rows_fwd(const float* src, const int64_t* idx, int64_t n, int64_t width, float* dst) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * width, src + idx[i] * width, width * 4);
}
void moe_combine_fwd(const float* y, const int64_t* inv, const float* weight, int64_t rows,
                     int64_t k, int64_t width, float* c) {
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = t * k + j;
      for (int64_t x = 0; x < width; ++x) c[t * width + x] += weight[i] * y[inv[i] * width + x];
    }
}
void moe_combine_bwd(const float* y, const int64_t* inv, const float* weight, int64_t rows,
                     int64_t k, int64_t width, const float* dc, float* dy, float* dweight) {
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = t * k + j;
      double s = 0;
      for (int64_t x = 0; x < width; ++x) {
        dy[inv[i] * width + x] += weight[i] * dc[t * width + x];
        s += double(dc[t * width + x]) * y[inv[i] * width + x];
      }
      dweight[i] += float(s);
    }
}
void gather_choices_bwd(const float* ddst, const int64_t* inv, int64_t rows, int64_t k,
                        int64_t width, float* dsrc) {
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t x = 0; x < width; ++x) dsrc[t * width + x] += ddst[inv[t * k + j] * width + x];
}
}  // namespace k3::train::gpu
