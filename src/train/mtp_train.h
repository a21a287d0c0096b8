// The multi-token prediction head of training (num_nextn_predict_layers = 1; DeepSeek-V3 style,
// depth 1, docs/TRAINING.md): for positions t < T-1 it combines the main model's final hidden
// state h_t (the output AttnRes mix, before the final norm) with the embedding of token t+1,
//   u = eh_proj · concat(enorm(embed(tokens[t+1])), hnorm(h_t))            [n, d], n = T-1
// runs one K3 layer on u with plain residuals (MLA attention; LatentMoE FFN when the model has
// experts, else dense SiTU-GLU), and predicts targets[t+1] through shared_head.norm and the
// main model's lm_head. The embedding and lm_head are the main model's (shared).
#pragma once

#include <cstdint>
#include <memory>

#include "train/layers_train.h"

namespace k3::train {

struct MtpTape {
  int64_t n = 0;          // positions predicted
  Buf e, h;               // next-token embeddings, main hidden rows [n, d]
  Buf cat, u;             // concat(enorm(e), hnorm(h)) [n, 2d]; eh_proj output [n, d]
  Buf x, u1, xf, u2, yn;  // attention input, after attention, FFN input, after FFN, head norm
  Buf logits;             // [n, V]
  MlaTape mla;
  std::unique_ptr<MoeTape> moe;
  std::unique_ptr<GluTape> dense;
};

// The MTP layer's parameter prefix, "language_model.model.layers.{n_layer}.".
std::string mtp_prefix(const HParams& hp);

// Mean cross-entropy of the head over n = T-1 positions (T >= 2). next_tokens = tokens + 1,
// next_targets = targets + 1 (each n long); h is the main hidden state [T, d].
double mtp_fwd(const HParams& hp, const Scope& model, const Scope& top, const int64_t* next_tokens,
               const Buf& h, const int64_t* next_targets, int64_t n, MtpTape& t);
// Backward of weight · mtp_fwd's loss: parameter grads into the scopes' grads, the embedding's
// into embed_tokens, and ∂/∂h into the first n rows of dh [T, d] (added).
void mtp_back(const HParams& hp, const Scope& model, const Scope& top, const int64_t* next_tokens,
              const int64_t* next_targets, const MtpTape& t, double weight, Buf& dh);

}  // namespace k3::train
