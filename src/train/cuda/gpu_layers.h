// The training pass on the device, layer by layer: the same sublayers, tapes and backwards as
// the CPU's (train/layers_train.h), over a batch of B windows of T tokens at once (rows
// b·T + t, N = B·T), with every buffer in device memory. The parameters and their gradients
// live in one device buffer each (GpuParams); a Scope names a layer's tensors in them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "k3/hparams.h"
#include "train/cuda/train_ops.h"
#include "train/params.h"

namespace k3::train::gpu {

struct GWeight {
  const float* w = nullptr;
  float* g = nullptr;
  int64_t rows = 0, cols = 0;  // a vector: rows = 1
};

// Every parameter tensor in one device buffer, the gradients in another at the same offsets
// (one copy each way per step, one memset to zero the gradients).
class GpuParams {
 public:
  explicit GpuParams(const ParamSet& like);  // the layout of `like` (names, shapes)
  void upload(const ParamSet& values);       // same names and shapes as the layout
  void zero_grads();
  void add_grads_into(ParamSet& grads);        // grads += the device gradients
  GWeight get(const std::string& name) const;  // throws naming an unknown tensor

 private:
  struct Slot {
    int64_t offset = 0, rows = 1, cols = 1;
  };
  std::map<std::string, Slot> slots_;
  DevBuf values_, grads_;
  PinnedBuf staging_;  // host side of the copies
};

struct Scope {
  const GpuParams& p;
  std::string prefix;
  GWeight operator()(const std::string& name) const { return p.get(prefix + name); }
  Scope sub(const std::string& more) const { return {p, prefix + more}; }
};

struct Rows {
  int64_t B = 0, T = 0;  // windows, tokens per window
  int64_t N() const { return B * T; }
};

// y [N, w.rows] = x [N, w.cols] · Wᵀ, and its backward (adds dW, and dx when given).
DevBuf lin(const DevBuf& x, int64_t N, const GWeight& w);
void lin_back(const DevBuf& x, int64_t N, const GWeight& w, const DevBuf& dy, DevBuf* dx);
// RMS norm over rows of n, and its backward (adds dx and dw).
DevBuf rms(const DevBuf& x, int64_t n, const GWeight& w, float eps);
void rms_back(const DevBuf& x, int64_t n, const GWeight& w, float eps, const DevBuf& dy,
              DevBuf& dx);

struct KdaTape {
  DevBuf pre[3], conv[3];  // q/k/v projections [N, P] and after conv + SiLU
  DevBuf low, f, g;        // gate: [N, K] low rank, [N, P] pre-activation, log decay
  DevBuf b_logit, beta;    // [N, H]
  DevBuf qn, kn, qs;       // L2-normalised q, k; scaled q  [N, H, K]
  DevBuf states;           // [B, H, T+1, K, K] the delta rule's states
  DevBuf o, z, y;          // core output, output gate, gated norm  [N, H, K]
};

struct MlaTape {
  DevBuf cq0, cq, q;  // LoRA query before/after its norm [N, Lq]; queries [N, H, Dq]
  DevBuf a, c0, c;    // latent projection [N, Dc+Dr]; latent before/after its norm [N, Dc]
  DevBuf k, v, o;     // expanded keys [N, H, Dq], values and core output [N, H, Dv]
  DevBuf probs;       // [B, H, T, T] attention probabilities
  DevBuf gate, og;    // output gate logits and gated output [N, H*Dv]
};

struct GluTape {
  DevBuf a, b, h;  // gate, up [n, I]; SiTU-GLU activation
};

struct MoeTape {
  DevBuf logits;               // [N, E]
  DevArray<int32_t> sel;       // [N, k]
  DevBuf weight;               // [N, k]
  DevBuf z, c, cn;             // latent input [N, L]; combine before/after its norm
  std::vector<int64_t> count;  // [E] choices routed to each expert (host)
  DevArray<int64_t> inv;       // [N·k] position of each flat choice in the expert order
  DevBuf zin, y;               // expert inputs and outputs [N·k, L], expert by expert
  GluTape experts;             // [N·k, I], expert by expert
  GluTape shared;
};

void kda_fwd(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, KdaTape& t, DevBuf& out);
void kda_back(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, const KdaTape& t,
              const DevBuf& dout, DevBuf& dx);
void mla_fwd(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, MlaTape& t, DevBuf& out);
void mla_back(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, const MlaTape& t,
              const DevBuf& dout, DevBuf& dx);

struct GluNames {
  const char *gate, *up, *down;
};
void glu_fwd(const Scope& s, GluNames n, const HParams& hp, const DevBuf& x, int64_t rows,
             GluTape& t, DevBuf& out);
void glu_back(const Scope& s, GluNames n, const HParams& hp, const DevBuf& x, int64_t rows,
              const GluTape& t, const DevBuf& dout, DevBuf& dx);
void moe_fwd(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, MoeTape& t, DevBuf& out);
void moe_back(const Scope& s, const HParams& hp, const DevBuf& x, Rows r, const MoeTape& t,
              const DevBuf& dout, DevBuf& dx);

}  // namespace k3::train::gpu
