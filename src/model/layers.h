// The sublayers of one K3 decoder layer, each reading a normalised input x [T, d] and
// writing its output [T, d]. Prefill uses the parallel forms (chunked KDA, expanded MLA);
// decode uses the recurrent forms (recurrent KDA, absorbed MLA over the latent cache).
#pragma once

#include <cstdint>

#include "model/hparams.h"
#include "model/state.h"
#include "model/weights.h"

namespace k3 {

enum class Pass { prefill, decode };

void kda_layer(const float* x, int64_t T, const KdaWeights& w, const HParams& hp, KdaState& st,
               Pass pass, float* out);
void mla_layer(const float* x, int64_t T, const MlaWeights& w, const HParams& hp, MlaCache& cache,
               int64_t n_past, Pass pass, float* out);
void dense_ffn(const float* x, int64_t T, const FfnWeights& w, const HParams& hp, float* out);
void moe_block(const float* x, int64_t T, const MoeWeights& w, const HParams& hp, float* out);

}  // namespace k3
