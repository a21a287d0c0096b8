#include "ops/mla/mla.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace k3 {
namespace {

// In-place softmax of p[0..n).
void softmax(float* p, int64_t n) {
  float mx = p[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, p[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::exp(p[i] - mx);
    sum += p[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) p[i] *= inv;
}

}  // namespace

void mla_attention_expanded(const float* q, const float* k, const float* v, MlaShape s, float* o) {
  const int64_t H = s.H, Dq = s.Dn + s.Dr, Dv = s.Dv, S = s.n_past + s.T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dq));
#pragma omp parallel
  {
    std::vector<float> p(static_cast<size_t>(S));
#pragma omp for collapse(2) schedule(static)
    for (int64_t t = 0; t < s.T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t n = s.n_past + t + 1;  // visible keys
        const float* qh = q + (t * H + h) * Dq;
        for (int64_t tau = 0; tau < n; ++tau) {
          const float* kh = k + (tau * H + h) * Dq;
          float acc = 0;
          for (int64_t i = 0; i < Dq; ++i) acc += qh[i] * kh[i];
          p[tau] = acc * scale;
        }
        softmax(p.data(), n);
        float* oh = o + (t * H + h) * Dv;
        for (int64_t j = 0; j < Dv; ++j) oh[j] = 0;
        for (int64_t tau = 0; tau < n; ++tau) {
          const float* vh = v + (tau * H + h) * Dv;
          for (int64_t j = 0; j < Dv; ++j) oh[j] += p[tau] * vh[j];
        }
      }
    }
  }
}

void mla_attention_absorbed(const float* q, const float* cache, const Mat& kv_b, MlaShape s,
                            float* o) {
  const int64_t H = s.H, Dq = s.Dn + s.Dr, Dc = s.Dc, Dr = s.Dr, Dn = s.Dn, Dv = s.Dv;
  const int64_t S = s.n_past + s.T, Dcache = Dc + Dr;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dq));
#pragma omp parallel
  {
    std::vector<float> wkv(static_cast<size_t>((Dn + Dv) * Dc));  // this head's kv_b rows
    std::vector<float> qt(static_cast<size_t>(Dc)), ob(static_cast<size_t>(Dc));
    std::vector<float> p(static_cast<size_t>(S));
#pragma omp for schedule(static)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t r = 0; r < Dn + Dv; ++r) mat_row(kv_b, h * (Dn + Dv) + r, &wkv[r * Dc]);
      for (int64_t t = 0; t < s.T; ++t) {
        const float* qh = q + (t * H + h) * Dq;
        for (int64_t c = 0; c < Dc; ++c) qt[c] = 0;  // q̃ = W_UKᵀ q^N
        for (int64_t j = 0; j < Dn; ++j) {
          for (int64_t c = 0; c < Dc; ++c) qt[c] += qh[j] * wkv[j * Dc + c];
        }
        const int64_t n = s.n_past + t + 1;
        for (int64_t tau = 0; tau < n; ++tau) {
          const float* ct = cache + tau * Dcache;
          float acc = 0;
          for (int64_t c = 0; c < Dc; ++c) acc += qt[c] * ct[c];
          for (int64_t i = 0; i < Dr; ++i) acc += qh[Dn + i] * ct[Dc + i];
          p[tau] = acc * scale;
        }
        softmax(p.data(), n);
        for (int64_t c = 0; c < Dc; ++c) ob[c] = 0;  // ō = Σ p ĉ
        for (int64_t tau = 0; tau < n; ++tau) {
          for (int64_t c = 0; c < Dc; ++c) ob[c] += p[tau] * cache[tau * Dcache + c];
        }
        float* oh = o + (t * H + h) * Dv;  // o = W_UV ō
        for (int64_t j = 0; j < Dv; ++j) {
          const float* wr = &wkv[(Dn + j) * Dc];
          float acc = 0;
          for (int64_t c = 0; c < Dc; ++c) acc += wr[c] * ob[c];
          oh[j] = acc;
        }
      }
    }
  }
}

}  // namespace k3
