#include "cost/memory.h"

#include <algorithm>

#include "cost/params.h"
#include "k3/error.h"

namespace k3::cost {

StateSizes state_sizes(const HParams& hp) {
  StateSizes s;
  s.mla_scalars_per_token = hp.mla.cache_width();
  s.mla_layers = hp.n_layers_of(AttnKind::mla);
  s.kda_state_scalars = hp.kda.n_head * hp.kda.head_dim * hp.kda.head_dim;
  s.kda_conv_scalars = 3 * hp.kda.proj_dim() * (hp.kda.conv_kernel - 1);
  s.kda_layers = hp.n_layers_of(AttnKind::kda);
  return s;
}

double kda_mla_crossover(const HParams& hp, double state_bytes, bool with_conv,
                         double cache_bytes) {
  StateSizes s = state_sizes(hp);
  double state = static_cast<double>(s.kda_state_scalars + (with_conv ? s.kda_conv_scalars : 0));
  return state * state_bytes / (static_cast<double>(s.mla_scalars_per_token) * cache_bytes);
}

double hybrid_attention_bytes(const HParams& hp, double tokens, double state_bytes) {
  StateSizes s = state_sizes(hp);
  double cache = static_cast<double>(s.mla_bytes_per_token(2)) * tokens;
  return cache + static_cast<double>(s.kda_layers * s.kda_state_scalars) * state_bytes;
}

double all_mla_attention_bytes(const HParams& hp, double tokens) {
  StateSizes s = state_sizes(hp);
  return static_cast<double>(s.mla_scalars_per_token * hp.n_layer * 2) * tokens;
}

double expert_bytes_per_param(const HParams& hp) {
  return hp.moe.expert_format == ExpertFormat::mxfp4 ? 17.0 / 32.0 : 2.0;
}

WeightBytes weight_bytes(const HParams& hp) {
  ParamCounts c = param_counts(hp);
  const KdaHParams& k = hp.kda;
  // F32 tensors: conv taps, A_log (padded), dt_bias, o_norm per KDA layer; router bias per MoE.
  double f32_kda = static_cast<double>(3 * k.proj_dim() * k.conv_kernel +
                                       std::max(k.n_head, k.head_dim) + k.proj_dim() + k.head_dim);
  double f32 =
      f32_kda * static_cast<double>(c.n_kda) + static_cast<double>(hp.moe.n_expert * c.n_moe);
  double routed = static_cast<double>(c.routed_total());
  WeightBytes w;
  w.experts = routed * expert_bytes_per_param(hp);
  w.other = (static_cast<double>(c.total()) - routed - f32) * 2 + f32 * 4;
  return w;
}

MemoryAt memory_at(const HParams& hp, int64_t context, int64_t batch) {
  check(context >= 0 && batch >= 1, "memory: context must be >= 0 and batch >= 1, found ", context,
        " and ", batch);
  StateSizes s = state_sizes(hp);
  MemoryAt m;
  m.context = context;
  m.batch = batch;
  m.weights = weight_bytes(hp).total();
  const double tb = static_cast<double>(context) * static_cast<double>(batch);
  m.mla_cache = static_cast<double>(s.mla_bytes_per_token(2)) * tb;
  m.kda_state = static_cast<double>(s.kda_total_bytes(4)) * static_cast<double>(batch);
  m.all_mla_cache = static_cast<double>(s.mla_scalars_per_token * hp.n_layer * 2) * tb;
  return m;
}

}  // namespace k3::cost
