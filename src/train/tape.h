// Small helpers of the training forward/backward: fp32 buffers, a parameter matrix with its
// gradient, and linear layers that record nothing themselves (the layer tapes keep inputs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "k3/hparams.h"
#include "ops/registry.h"
#include "train/params.h"

namespace k3::train {

using Buf = std::vector<float>;

inline Buf zeros(int64_t n) { return Buf(static_cast<size_t>(n), 0.0f); }

// A parameter tensor (rows × cols; a vector has cols = its length, rows = 1) and its gradient.
struct Weight {
  const float* w = nullptr;
  float* g = nullptr;
  int64_t rows = 0, cols = 0;
  Impl impl = Impl::cpu;  // the forward launchers to use (see Scope)
};

// The parameters of one prefix ("language_model.model.layers.3.self_attn.") and their grads.
// `impl` picks the ops' forward launchers: cpu (fast fp32) or ref (double inside, fp32 out);
// `kda_chunk` is the chunk length of KDA's chunked form (forward and backward).
struct Scope {
  const ParamSet& p;
  ParamSet& grads;
  std::string prefix;
  Impl impl = Impl::cpu;
  int64_t kda_chunk = 64;
  Weight operator()(const std::string& name) const;  // throws for an unknown name
  Scope sub(const std::string& more) const { return {p, grads, prefix + more, impl, kda_chunk}; }
};

// y [T, w.rows] = x [T, w.cols] · Wᵀ.
Buf linear_fwd(const Buf& x, int64_t T, const Weight& w);
// Adds dW (into w.g) and, when dx is given, dx [T, w.cols] for dy [T, w.rows].
void linear_back(const Buf& x, int64_t T, const Weight& w, const Buf& dy, Buf* dx);

// RMS norm over rows of n with weight w: forward, and backward adding dx and dw.
Buf rms_fwd(const Buf& x, int64_t n, const Weight& w, float eps);
void rms_back(const Buf& x, int64_t n, const Weight& w, float eps, const Buf& dy, Buf& dx);

}  // namespace k3::train
