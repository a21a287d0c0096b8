#include "train/cuda/gpu_profile.h"

#if defined(K3_HAVE_CUDA)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "train/cuda/train_ops.h"

namespace k3::train::gpu {

PassProfile& PassProfile::instance() {
  static PassProfile p;
  return p;
}

PassProfile::PassProfile() {
  const char* v = std::getenv("K3_TRAIN_PROFILE");
  enabled_ = v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

PassProfile::Timer::Timer(PassProfile& p, const char* phase)
    : p_(p.enabled() ? &p : nullptr), phase_(phase) {
  if (p_ == nullptr) return;
  sync();  // the work queued before belongs to an earlier phase
  start_ = std::chrono::steady_clock::now();
}

PassProfile::Timer::~Timer() {
  if (p_ == nullptr) return;
  try {
    sync();
  } catch (...) {  // a device error: the pass's next call reports it (no throw from here)
    return;
  }
  p_->seconds_[phase_] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  ++p_->calls_[phase_];
}

std::string PassProfile::report() const {
  std::vector<std::pair<double, std::string>> rows;
  double timed = 0;
  for (const auto& [name, s] : seconds_) {
    rows.emplace_back(s, name);
    timed += s;
  }
  std::sort(rows.rbegin(), rows.rend());
  const double total = std::max(run_seconds_, timed);
  char line[160];
  auto add = [&](std::string& out, const std::string& name, double s, long calls) {
    std::snprintf(line, sizeof line, "  %-36s %9.3f s  %5.1f%%  %8ld calls\n", name.c_str(), s,
                  total > 0 ? 100 * s / total : 0.0, calls);
    out += line;
  };
  std::string out = "GPU training passes, where the time went (K3_TRAIN_PROFILE):\n";
  for (const auto& [s, name] : rows) add(out, name, s, calls_.at(name));
  add(out, "(untimed: mixes, norms, adds)", total - timed, 0);
  return out;
}

void PassProfile::reset() {
  seconds_.clear();
  calls_.clear();
  run_seconds_ = 0;
}

}  // namespace k3::train::gpu
#endif  // K3_HAVE_CUDA
