// The sublayers of the training forward (one sequence of T tokens from an empty state, fp32),
// each keeping in its tape what its backward needs, and the backwards. Each backward ADDS its
// input gradient into dx and its parameter gradients into the Scope's grads. The maths is the
// model's (src/model/, spec §3-§6); KDA runs the chunked form, MLA the expanded one.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ops/kda/kda_chunked_train.h"
#include "train/tape.h"

namespace k3::train {

struct KdaTape {
  Buf pre[3], conv[3];  // q/k/v projections [T, P] and after conv + SiLU
  Buf low, f, g;        // gate: [T, K] low rank, [T, P] pre-activation, log decay
  Buf b_logit, beta;    // [T, H]
  Buf qn, kn, qs;       // L2-normalised q, k; scaled q  [T, H, K]
  Buf o, z, y;          // core output, output gate, gated norm  [T, H, K]
  std::shared_ptr<const KdaChunkedSaved> chunks;  // the chunked forward, for its backward
};

struct MlaTape {
  Buf cq0, cq, q;  // LoRA query before/after its norm [T, Lq]; queries [T, H, Dq]
  Buf a, c0, c;    // latent projection [T, Dc+Dr]; latent before/after its norm [T, Dc]
  Buf k, v, o;     // expanded keys [T, H, Dq], values and core output [T, H, Dv]
  Buf gate, og;    // output gate logits and gated output [T, H*Dv]
};

struct GluTape {
  Buf a, b, h;  // gate, up [n, I]; SiTU-GLU activation
};

struct ExpertTape {
  std::vector<int64_t> choices;  // flat t*k + j routed to this expert
  Buf zin, y;                    // gathered latent rows [n, L]; expert output
  GluTape glu;
};

struct MoeTape {
  Buf logits;                // [T, E]
  std::vector<int32_t> sel;  // [T, k]
  Buf weight;                // [T, k]
  Buf z, c, cn;              // latent input [T, L]; combine before/after its norm
  std::vector<ExpertTape> experts;
  GluTape shared;
};

void kda_fwd(const Scope& s, const HParams& hp, const Buf& x, int64_t T, KdaTape& t, Buf& out);
void kda_back(const Scope& s, const HParams& hp, const Buf& x, int64_t T, const KdaTape& t,
              const Buf& dout, Buf& dx);

void mla_fwd(const Scope& s, const HParams& hp, const Buf& x, int64_t T, MlaTape& t, Buf& out);
void mla_back(const Scope& s, const HParams& hp, const Buf& x, int64_t T, const MlaTape& t,
              const Buf& dout, Buf& dx);

// down(φ(gate·x, up·x)) with the weights gate_name/up_name/down_name of `s`.
struct GluNames {
  const char *gate, *up, *down;
};
void glu_fwd(const Scope& s, GluNames n, const HParams& hp, const Buf& x, int64_t rows, GluTape& t,
             Buf& out);
void glu_back(const Scope& s, GluNames n, const HParams& hp, const Buf& x, int64_t rows,
              const GluTape& t, const Buf& dout, Buf& dx);

void moe_fwd(const Scope& s, const HParams& hp, const Buf& x, int64_t T, MoeTape& t, Buf& out);
void moe_back(const Scope& s, const HParams& hp, const Buf& x, int64_t T, const MoeTape& t,
              const Buf& dout, Buf& dx);

}  // namespace k3::train
