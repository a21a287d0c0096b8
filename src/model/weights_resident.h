// Uploads a model's weights to the CUDA device once (every matrix in its stored format, MXFP4
// kept packed, and every fp32 vector); the cuda launchers then find them by host address.
// Residency is counted per range: each make is paired with a release (an Engine does both), and
// the device copy goes with the last release, before the model's host memory can be reused.
#pragma once

#include "model/weights.h"

namespace k3 {

void make_weights_resident(const ModelWeights& w);
void release_weights_resident(const ModelWeights& w);

}  // namespace k3
