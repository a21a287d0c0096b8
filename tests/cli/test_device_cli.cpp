// --device on every command that runs the model: cpu runs, an unknown name is a one-line error,
// and cuda on a machine (or build) without it says which is missing instead of failing later.
#include <gtest/gtest.h>

#include "common/cli_harness.h"
#include "k3/device.h"
#include "k3/error.h"

namespace k3 {
namespace {

const std::string kTiny = K3_SOURCE_DIR "/tests/data/models/c1_tiny";

std::vector<std::vector<std::string>> commands(const std::string& device) {
  return {{"bench", "-m", kTiny, "-p", "3", "-n", "2", "-r", "1", "-t", "1", "--device", device},
          {"logits", "-m", kTiny, "--ids", "1,2,3", "-o", "/dev/null", "--device", device}};
}

TEST(DeviceFlag, CpuRunsAndUnknownNamesAreErrors) {
  for (const auto& args : commands("cpu")) {
    const test::CliResult r = test::run_k3(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
  }
  for (const auto& args : commands("tpu")) {
    const test::CliResult r = test::run_k3(args);
    EXPECT_EQ(r.exit_code, 1) << args[0];
    EXPECT_NE(r.err.find("unknown device 'tpu' (expected cpu or cuda)"), std::string::npos)
        << r.err;
  }
}

TEST(DeviceFlag, CudaWithoutADeviceSaysWhatIsMissing) {
  if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is here (tests/cuda covers it)";
  for (const auto& args : commands("cuda")) {
    const test::CliResult r = test::run_k3(args);
    EXPECT_EQ(r.exit_code, 1) << args[0];
    EXPECT_NE(r.err.find("device cuda: "), std::string::npos) << r.err;
  }
  EXPECT_THROW(set_default_device("cuda"), Error);
  EXPECT_EQ(default_device(), "cpu");  // a refused choice changes nothing
}

}  // namespace
}  // namespace k3
