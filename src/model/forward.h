// The K3 text forward pass (spec §2, §5.2): embedding, the layer loop with Block Attention
// Residuals, the final mix, norm and LM head.
#pragma once

#include <cstdint>

#include "model/hparams.h"
#include "model/layers.h"
#include "model/state.h"
#include "model/weights.h"

namespace k3 {

// ids [T] (validated against the vocabulary) -> logits [T, vocab]. Advances st.n_past by T.
void forward(const ModelWeights& w, const HParams& hp, SequenceState& st, const int64_t* ids,
             int64_t T, Pass pass, float* logits);

}  // namespace k3
