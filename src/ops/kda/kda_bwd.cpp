// Backward of the KDA recurrence (the checkable form; spec §3.6), per head, reverse in time.
// Forward step t (a = e^{g_t} per key channel):
//   S̄ = Diag(a) S_{t-1},  u = v_t − S̄ᵀ k_t,  S_t = S̄ + β_t k_t uᵀ,  o_t = S_tᵀ q_t.
// Reverse, with dS the gradient of S_t (zero after the last token):
//   dq_t = S_t do_t;  dS += q_t do_tᵀ;  dβ_t = k_tᵀ dS u;  du = β_t dSᵀ k_t;  dv_t = du;
//   dk_t = β_t dS u − S̄ du;  dS̄ = dS − k_t duᵀ;  dg_t = a ⊙ rowsum(dS̄ ⊙ S_{t-1});
//   dS_{t-1} = Diag(a) dS̄.
// The forward states are recomputed and kept (T+1 of [K, V] per head): fine for the training
// shapes this serves; the chunked backward would keep one per chunk.
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "ops/kda/kda.h"

namespace k3 {
namespace {

struct HeadView {  // strided access to one head of [T, H, X] tensors
  int64_t H, h;
  const float* at(const float* p, int64_t t, int64_t X) const { return p + (t * H + h) * X; }
  float* at(float* p, int64_t t, int64_t X) const { return p + (t * H + h) * X; }
};

void add_to(float* dst, const HeadView& hv, int64_t t, int64_t X, const double* src) {
  if (dst == nullptr) return;
  float* p = hv.at(dst, t, X);
  for (int64_t i = 0; i < X; ++i) p[i] += static_cast<float>(src[i]);
}

void head_bwd(const KdaInputs& in, KdaShape s, int64_t h, const float* S0, const float* d_o,
              const KdaGrads& d) {
  const int64_t T = s.T, K = s.K, V = s.V, KV = K * V;
  const HeadView hv{s.H, h};
  // states[t] = S_t for t = 0 … T (states[0] = S0), row-major [K, V].
  std::vector<double> states(static_cast<size_t>((T + 1) * KV), 0.0);
  if (S0 != nullptr) {
    for (int64_t i = 0; i < KV; ++i) states[i] = S0[h * KV + i];
  }
  std::vector<double> u(static_cast<size_t>(T * V));  // u_t per token
  for (int64_t t = 0; t < T; ++t) {
    const double* prev = &states[t * KV];
    double* cur = &states[(t + 1) * KV];
    const float *k = hv.at(in.k, t, K), *v = hv.at(in.v, t, V), *g = hv.at(in.g, t, K);
    const double beta = in.beta[t * s.H + h];
    for (int64_t i = 0; i < K; ++i) {
      const double a = std::exp(double(g[i]));
      for (int64_t j = 0; j < V; ++j) cur[i * V + j] = a * prev[i * V + j];
    }
    double* ut = &u[t * V];
    for (int64_t j = 0; j < V; ++j) {
      double acc = v[j];
      for (int64_t i = 0; i < K; ++i) acc -= cur[i * V + j] * k[i];
      ut[j] = acc;
    }
    for (int64_t i = 0; i < K; ++i) {
      for (int64_t j = 0; j < V; ++j) cur[i * V + j] += beta * k[i] * ut[j];
    }
  }
  std::vector<double> dS(static_cast<size_t>(KV), 0.0);
  std::vector<double> dq(K), dk(K), dv(V), dg(K), du(V);
  for (int64_t t = T - 1; t >= 0; --t) {
    const double* prev = &states[t * KV];
    const double* cur = &states[(t + 1) * KV];
    const float *q = hv.at(in.q, t, K), *k = hv.at(in.k, t, K), *g = hv.at(in.g, t, K);
    const float* dot = hv.at(d_o, t, V);
    const double beta = in.beta[t * s.H + h];
    const double* ut = &u[t * V];
    for (int64_t i = 0; i < K; ++i) {  // dq = S_t do;  dS += q doᵀ
      double acc = 0;
      for (int64_t j = 0; j < V; ++j) {
        acc += cur[i * V + j] * dot[j];
        dS[i * V + j] += double(q[i]) * dot[j];
      }
      dq[i] = acc;
    }
    double dbeta = 0;
    std::fill(du.begin(), du.end(), 0.0);
    for (int64_t i = 0; i < K; ++i) {  // dβ = kᵀ dS u;  du = β dSᵀ k;  dk = β dS u
      double dSu = 0;
      for (int64_t j = 0; j < V; ++j) {
        dSu += dS[i * V + j] * ut[j];
        du[j] += beta * dS[i * V + j] * k[i];
      }
      dbeta += k[i] * dSu;
      dk[i] = beta * dSu;
    }
    for (int64_t i = 0; i < K; ++i) {  // S̄ = Diag(a) S_{t-1};  dk −= S̄ du;  dS̄ = dS − k duᵀ
      const double a = std::exp(double(g[i]));
      double Sdu = 0, da = 0;
      for (int64_t j = 0; j < V; ++j) {
        const double sb = a * prev[i * V + j];
        Sdu += sb * du[j];
        const double dsb = dS[i * V + j] - k[i] * du[j];
        da += dsb * prev[i * V + j];
        dS[i * V + j] = a * dsb;  // dS_{t-1}
      }
      dk[i] -= Sdu;
      dg[i] = a * da;
    }
    for (int64_t j = 0; j < V; ++j) dv[j] = du[j];
    add_to(d.q, hv, t, K, dq.data());
    add_to(d.k, hv, t, K, dk.data());
    add_to(d.v, hv, t, V, dv.data());
    add_to(d.g, hv, t, K, dg.data());
    if (d.beta != nullptr) d.beta[t * s.H + h] += static_cast<float>(dbeta);
  }
}

}  // namespace

void kda_recurrent_bwd(const KdaInputs& in, KdaShape s, const float* S0, const float* d_o,
                       const KdaGrads& d) {
  parallel_for(s.H, s.T * s.K * s.V > 4096, [&](int64_t h) { head_bwd(in, s, h, S0, d_o, d); });
}

}  // namespace k3
