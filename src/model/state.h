// Per-sequence decode state (spec §2.1): KDA conv history + recurrent state per KDA layer
// (fixed size), and the MLA latent cache per MLA layer (576 scalars per token for the release).
// AttnRes, norms and FFNs keep nothing between forward passes.
#pragma once

#include <cstdint>
#include <vector>

#include "model/hparams.h"

namespace k3 {

struct KdaState {
  std::vector<float> conv_q, conv_k, conv_v;  // [P, W-1] previous pre-conv inputs, oldest first
  std::vector<float> S;                       // [H, K, V] recurrent state, fp32
};

struct MlaCache {
  std::vector<float> rows;  // [n_tokens, Dc + Dr]: normalised latent ĉ, then the shared key r
};

struct SequenceState {
  int64_t n_past = 0;         // tokens already absorbed
  std::vector<KdaState> kda;  // indexed by layer; empty for MLA layers
  std::vector<MlaCache> mla;  // indexed by layer; empty for KDA layers

  explicit SequenceState(const HParams& hp);
  void reset();
  size_t bytes() const;  // memory held now
};

}  // namespace k3
