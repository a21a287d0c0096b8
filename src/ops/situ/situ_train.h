// The SiTU-GLU forward of the training path: φ(a, b) (ops/situ/situ.h) with the vectorisable
// float tanh / sigmoid of core/fast_math.h (4e-7 relative each) instead of libm's scalar
// calls. Inference keeps the registered cpu launcher.
#pragma once

#include <cstdint>

#include "ops/situ/situ.h"

namespace k3 {

// gate [n], up [n] -> out [n]; out may alias gate.
void situ_glu_train(const float* gate, const float* up, int64_t n, SituParams p, float* out);

}  // namespace k3
