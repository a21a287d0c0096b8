// --precision on every command that runs the model: fp32, bf16 and q8 run (bf16 / q8 show in
// k3 bench's backend), an unknown name is a one-line error, and a bad K3_PRECISION stops at
// start-up.
#include <gtest/gtest.h>

#include "common/cli_harness.h"

namespace k3 {
namespace {

const std::string kTiny = K3_SOURCE_DIR "/tests/data/models/c1_tiny";

std::vector<std::vector<std::string>> commands(const std::string& precision) {
  return {{"bench", "-m", kTiny, "-p", "3", "-n", "2", "-r", "1", "-t", "1", "-o", "json",
           "--precision", precision},
          {"logits", "-m", kTiny, "--ids", "1,2,3", "-o", "/dev/null", "--precision", precision}};
}

TEST(PrecisionFlag, EveryCommandThatRunsTheModelTakesIt) {
  for (const char* cmd : {"run", "chat", "serve", "bench", "perplexity", "logits"}) {
    const test::CliResult r = test::run_k3({"help", cmd});
    if (std::string(cmd) == "serve" && r.err.find("no HTTP server") != std::string::npos) {
      continue;  // a build without cpp-httplib (K3_SERVER=OFF: the sanitizer builds) has no serve
    }
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE((r.out + r.err).find("--precision"), std::string::npos) << cmd << ": " << r.out;
  }
}

TEST(PrecisionFlag, Fp32Bf16AndQ8RunAndUnknownNamesAreErrors) {
  for (const char* p : {"fp32", "bf16", "q8"}) {
    for (const auto& args : commands(p)) {
      const test::CliResult r = test::run_k3(args);
      EXPECT_EQ(r.exit_code, 0) << args[0] << " " << p << ": " << r.err;
      if (args[0] == "bench") {
        EXPECT_EQ(r.out.find("+bf16") != std::string::npos, std::string(p) == "bf16") << r.out;
        EXPECT_EQ(r.out.find("+q8") != std::string::npos, std::string(p) == "q8") << r.out;
      }
    }
  }
  for (const auto& args : commands("fp16")) {
    const test::CliResult r = test::run_k3(args);
    EXPECT_EQ(r.exit_code, 1) << args[0];
    EXPECT_NE(r.err.find("unknown precision 'fp16' (expected fp32, bf16 or q8)"), std::string::npos)
        << args[0] << ": " << r.err;
  }
}

TEST(PrecisionFlag, EnvironmentSetsTheDefaultAndABadValueStops) {
  const std::vector<std::string> bench = {"bench", "-m", kTiny, "-p", "3",  "-n",  "0",
                                          "-r",    "1",  "-t",  "1",  "-o", "json"};
  test::CliResult r = test::run_k3(bench, "", {{"K3_PRECISION", "bf16"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("+bf16"), std::string::npos) << r.out;
  r = test::run_k3({"bench", "-m", kTiny, "-p", "3", "-n", "0", "-r", "1", "-t", "1", "-o", "json",
                    "--precision", "fp32"},
                   "", {{"K3_PRECISION", "bf16"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("+bf16"), std::string::npos) << "the flag wins over the environment";
  r = test::run_k3(bench, "", {{"K3_PRECISION", "half"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown precision 'half'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3
