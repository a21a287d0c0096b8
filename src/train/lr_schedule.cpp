#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "k3/error.h"

namespace k3::train {

void LrSchedule::validate() const {
  check(peak > 0 && std::isfinite(peak), "lr schedule: peak lr must be positive, found ", peak);
  check(min >= 0 && min <= peak, "lr schedule: min lr must be in [0, peak], found ", min);
  check(total >= 1, "lr schedule: total steps must be positive, found ", total);
  check(warmup >= 0 && warmup <= total, "lr schedule: warmup must be in [0, total], found ",
        warmup);
  check(decay_fraction >= 0 && decay_fraction <= 1,
        "lr schedule: decay fraction must be in [0, 1], found ", decay_fraction);
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (shape == LrShape::constant) return peak;
  if (step >= total) return min;
  if (shape == LrShape::cosine) {
    const double p = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);
    return min + (peak - min) * 0.5 * (1 + std::cos(std::numbers::pi * p));
  }
  // wsd: decay over the last `decay` steps, at least the steps after warmup allow.
  const auto decay_steps = std::min<int64_t>(
      total - warmup, static_cast<int64_t>(std::llround(decay_fraction * double(total))));
  const int64_t start = total - decay_steps;
  if (step < start || decay_steps == 0) return peak;
  const double p = static_cast<double>(step - start) / static_cast<double>(decay_steps);
  const double f = wsd_decay == WsdDecay::linear ? 1 - p : 1 - std::sqrt(p);
  return min + (peak - min) * f;
}

LrShape parse_lr_shape(const std::string& name) {
  if (name == "constant") return LrShape::constant;
  if (name == "cosine") return LrShape::cosine;
  if (name == "wsd") return LrShape::wsd;
  fail("unknown lr schedule '", name, "': expected constant, cosine or wsd");
}

}  // namespace k3::train
