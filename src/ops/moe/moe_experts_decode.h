// moe_experts for a step of one or two tokens (decode), with two parallel loops per layer
// instead of three per chosen expert.
#pragma once

#include "ops/moe/moe_experts.h"

namespace k3 {

// The same arguments and the same result, to the bit, as moe_experts; false (nothing done)
// when s.T > kMoeDecodeMaxTokens.
constexpr int64_t kMoeDecodeMaxTokens = 2;
bool moe_experts_decode(const float* z, const int32_t* sel, const float* weight,
                        const ExpertMats* experts, MoeExpertsShape s, float* c);

}  // namespace k3
