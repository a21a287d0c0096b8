// Where a GPU training pass spends its time, when K3_TRAIN_PROFILE=1 is set: each timed phase
// waits for the device before and after, so its wall time is its own work, host side included
// (the waits cost a little throughput, so the switch is off by default). The totals over the
// run are printed on stderr when the GpuBatch goes.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace k3::train::gpu {

class PassProfile {
 public:
  static PassProfile& instance();
  bool enabled() const { return enabled_; }

  // Times one phase from construction to destruction (nothing when disabled).
  class Timer {
   public:
    Timer(PassProfile& p, const char* phase);
    ~Timer();
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    PassProfile* p_;  // null when disabled
    const char* phase_;
    std::chrono::steady_clock::time_point start_;
  };

  // Whole passes (GpuBatch::run), which the phases should not overlap: the rest of their time
  // is reported as untimed.
  void add_run(double seconds) { run_seconds_ += seconds; }

  // Phases by total time: seconds, share of the runs' time, calls; then the untimed rest.
  std::string report() const;
  void reset();

 private:
  PassProfile();
  bool enabled_ = false;
  std::map<std::string, double> seconds_;
  std::map<std::string, long> calls_;
  double run_seconds_ = 0;
};

// `K3_PROFILE_PHASE("name");` times the rest of the enclosing block (phases do not nest).
#define K3_PROFILE_CONCAT2(a, b) a##b
#define K3_PROFILE_CONCAT(a, b) K3_PROFILE_CONCAT2(a, b)
#define K3_PROFILE_PHASE(name)                                                       \
  const ::k3::train::gpu::PassProfile::Timer K3_PROFILE_CONCAT(k3_phase_, __LINE__)( \
      ::k3::train::gpu::PassProfile::instance(), name)

}  // namespace k3::train::gpu
