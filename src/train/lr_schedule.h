// Learning-rate schedules, as a function of the optimiser step s = 0, 1, ... (the lr used by
// the (s+1)-th update):
//   warmup   s < W: peak (s + 1) / W  (linear from peak/W, reaching peak at s = W - 1)
//   cosine   after warmup: min + (peak - min) (1 + cos(pi p)) / 2, p = (s - W) / (total - W)
//   wsd      warmup-stable-decay: peak until the last decay_fraction of the steps, then down to
//            min linearly (or by 1 - sqrt, the shape MiniCPM reports as better)
//   constant peak after warmup
// Steps at or past `total` get min (cosine, wsd) or peak (constant).
#pragma once

#include <cstdint>
#include <string>

namespace k3::train {

enum class LrShape : uint8_t { constant, cosine, wsd };
enum class WsdDecay : uint8_t { linear, one_minus_sqrt };

struct LrSchedule {
  LrShape shape = LrShape::cosine;
  double peak = 1e-3, min = 1e-4;
  int64_t warmup = 0, total = 1000;
  double decay_fraction = 0.2;  // wsd: share of `total` spent decaying
  WsdDecay wsd_decay = WsdDecay::linear;

  double at(int64_t step) const;
  void validate() const;  // throws k3::Error naming the bad field
};

LrShape parse_lr_shape(const std::string& name);  // "constant", "cosine" or "wsd"

}  // namespace k3::train
