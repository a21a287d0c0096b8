// The chunked KDA form for training: a forward that keeps, per head, each chunk's start state
// and intermediates (kda_chunked_bwd.cpp's algebra, in double), and the backward that uses
// them instead of running the forward again. Same gradients as kda_chunked_bwd (bit for bit);
// the forward's o matches kda_chunked to double rounding.
#pragma once

#include <cstdint>
#include <memory>

#include "ops/kda/kda.h"

namespace k3 {

struct KdaChunkedSaved;  // opaque: O(n² + n·(K+V)) doubles per chunk and head

// o [T, H, V] and the final state S [H, K, V] (may be nullptr) from S0 (nullptr: zero).
std::shared_ptr<const KdaChunkedSaved> kda_chunked_train_fwd(const KdaInputs& in, KdaShape s,
                                                             const float* S0, float* S, float* o,
                                                             int64_t chunk);
// Adds the gradients (as kda_chunked_bwd) for d_o [T, H, V]; `saved` is of this shape.
void kda_chunked_bwd_saved(const KdaChunkedSaved& saved, KdaShape s, const float* d_o,
                           const KdaGrads& d);

}  // namespace k3
