// What `k3 bench` sets decode speed against: the weight bytes a decode step reads per token, and
// the machine's memory read bandwidth measured in the same run.
#pragma once

#include <cstdint>
#include <string>

#include "k3/inspect.h"

namespace k3::cli {

// Weight bytes read per decoded token when `batch` sequences decode together: every tensor once
// per step, except the embedding (one row per token) and the routed experts (the expected share
// of them that at least one of the batch's tokens selects, top-k of E uniformly:
// 1 - (1 - k/E)^batch), divided by the batch.
double weight_bytes_per_token(const CheckpointSummary& ckpt, int64_t batch);

// Memory read bandwidth in bytes/s: `threads` threads sum disjoint parts of a `bytes`-sized
// buffer (far larger than any cache), best of `repeats` passes, STREAM-style.
double read_bandwidth(int threads, size_t bytes = size_t{256} << 20, int repeats = 5);

}  // namespace k3::cli
