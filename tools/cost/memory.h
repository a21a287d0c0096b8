// Cache, state and weight memory of a K3-style model (spec §2.1, §3.3, §3.6, §4.3, §9.2; the
// capacity model of [A2] "A fixed state still has a cost", FIG 24).
//
// Per sequence, a KDA layer keeps a fixed-size recurrent state S [H, K, V] plus the conv history
// (3 x [P, kernel-1] pre-conv inputs); an MLA layer keeps a latent cache of (kv_lora_rank +
// qk_rope) scalars per token. Units: scalars, bytes (B), tokens.
#pragma once

#include <cstdint>

#include "k3/hparams.h"

namespace k3::cost {

struct StateSizes {
  int64_t mla_scalars_per_token = 0;  // per MLA layer: 576 for K3
  int64_t mla_layers = 0;
  int64_t kda_state_scalars = 0;  // per KDA layer: H*K*V = 1,572,864
  int64_t kda_conv_scalars = 0;   // per KDA layer: 3*P*(kernel-1) = 110,592
  int64_t kda_layers = 0;
  // All MLA layers, per token: 576*24*bytes.
  int64_t mla_bytes_per_token(int64_t bytes_per_scalar) const {
    return mla_scalars_per_token * mla_layers * bytes_per_scalar;
  }
  // One KDA layer's recurrent state S.
  int64_t kda_state_bytes(int64_t bytes_per_scalar) const {
    return kda_state_scalars * bytes_per_scalar;
  }
  // All KDA layers, S + conv history, per sequence.
  int64_t kda_total_bytes(int64_t bytes_per_scalar) const {
    return (kda_state_scalars + kda_conv_scalars) * kda_layers * bytes_per_scalar;
  }
};

StateSizes state_sizes(const HParams& hp);

// Context length T* at which replacing MLA layers by KDA layers breaks even [A2]:
//   T* = (S [+ conv]) * state_bytes / (mla_scalars_per_token * cache_bytes).
// The number of replaced layers cancels. Returned unrounded (2730.67 for K3 at 2 B); callers
// report it rounded to the nearest token as the articles do (2731, 5461, 2923).
double kda_mla_crossover(const HParams& hp, double state_bytes, bool with_conv,
                         double cache_bytes = 2);

// Attention memory of one sequence at context T for the capacity plot [A2 FIG 24]: the hybrid
// (KDA states at `state_bytes` + MLA caches at 2 B) and the all-MLA counterfactual in which every
// layer keeps the latent cache. Conv states excluded, as in the article.
double hybrid_attention_bytes(const HParams& hp, double tokens, double state_bytes);
double all_mla_attention_bytes(const HParams& hp, double tokens);

// Stored weight bytes, by the dtypes of spec §9.2: BF16 except the F32 tensors (KDA conv taps,
// A_log, dt_bias, o_norm; the router bias) and, for an MXFP4 checkpoint, routed experts at
// 4.25 bits per weight (nibbles + one E8M0 byte per 32).
struct WeightBytes {
  double experts = 0;  // all routed experts of all MoE layers
  double other = 0;    // everything else
  double total() const { return experts + other; }
  // One device of an EP domain: experts sharded over ep_size devices, the rest replicated.
  double per_device(int64_t ep_size) const {
    return other + experts / static_cast<double>(ep_size);
  }
};

double expert_bytes_per_param(const HParams& hp);  // 2 (bf16) or 17/32 (MXFP4)
WeightBytes weight_bytes(const HParams& hp);

// Memory of a serving instance holding `batch` sequences of `context` tokens: weights + MLA
// caches (bf16) + KDA states and conv histories (fp32, as the reference keeps them).
struct MemoryAt {
  int64_t context = 0, batch = 0;
  double weights = 0, mla_cache = 0, kda_state = 0;
  double all_mla_cache = 0;  // the counterfactual: every layer MLA, same context and batch
  double total() const { return weights + mla_cache + kda_state; }
};

MemoryAt memory_at(const HParams& hp, int64_t context, int64_t batch);

}  // namespace k3::cost
