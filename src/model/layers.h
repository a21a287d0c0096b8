// The sublayers of one K3 decoder layer over a step's rows: each reads a normalised input
// x [T, d] (all sequences of the step, row-concatenated) and writes its output [T, d].
// Projections run once over all rows; the stateful cores (KDA conv and delta rule, MLA
// attention over the paged latent cache) run per sequence as the step plan says.
#pragma once

#include <cstdint>

#include "engine/plan.h"
#include "k3/hparams.h"
#include "model/weights.h"

namespace k3 {

// kda_index / mla_index: the layer's position among layers of its kind (state pool index).
void kda_layer(const Tensor& x, const KdaWeights& w, const HParams& hp, int64_t kda_index,
               LayerCtx& lc, const Tensor& out);
void mla_layer(const Tensor& x, const MlaWeights& w, const HParams& hp, int64_t mla_index,
               LayerCtx& lc, const Tensor& out);
// K3_STEP_PER_SEQUENCE=1 (benchmarks only: an A/B of the batched calls in one process): the
// short conv and the latent append run one call per sequence, as they did before their
// varlen ops. Read at every call; the results are identical either way.
bool step_per_sequence();
void dense_ffn(const Tensor& x, const FfnWeights& w, const HParams& hp, Ctx& ctx,
               const Tensor& out);
void moe_block(const Tensor& x, const MoeWeights& w, const HParams& hp, Ctx& ctx,
               const Tensor& out);

}  // namespace k3
