// The K3 text forward pass over one step (spec §2, §5.2): embedding, the layer loop with
// Block Attention Residuals, then the final mix, norm and LM head on the rows that need
// logits only.
#pragma once

#include <atomic>
#include <cstdint>

#include "engine/plan.h"
#include "k3/hparams.h"
#include "model/weights.h"

namespace k3 {

struct StepIO {
  const int64_t* tokens = nullptr;      // [plan.T], already validated against the vocabulary
  const int32_t* logit_rows = nullptr;  // [n_logits] rows of the step to compute logits for
  int64_t n_logits = 0;
  float* logits = nullptr;                    // [n_logits, vocab]
  const std::atomic<bool>* cancel = nullptr;  // polled before each layer after the first
};

// Writes every sequence's new latent rows and KDA state into the pool (whose blocks must be
// reserved for them); the caller advances the sequences afterwards. Throws k3::Cancelled when
// io.cancel is set before a layer other than the first: the earlier layers' state is written
// then, the later ones' not (the caller must treat the step's sequences as inconsistent).
void forward_step(const ModelWeights& w, const HParams& hp, const StepPlan& plan, StatePool& pool,
                  Ctx& ctx, const StepIO& io);

}  // namespace k3
