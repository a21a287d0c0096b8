#include "common_options.h"

#include "k3/k3.h"

namespace k3::cli {

Option threads_option() {
  return Option("threads", "t", "N", "worker threads (default: physical cores)", "").range(1, 1024);
}

void apply_threads(const Args& args) {
  if (args.given("threads")) set_num_threads(static_cast<int>(args.integer("threads")));
}

Option device_option() {
  return Option("device", "", "NAME",
                "where the model runs: cpu or cuda (default: $K3_DEVICE, else cpu)", "");
}

void apply_device(const Args& args) {
  if (args.given("device")) set_default_device(args.str("device"));
}

Option precision_option() {
  return Option("precision", "", "NAME",
                "CPU matmul arithmetic: fp32, bf16 (activations rounded to bf16; faster, "
                "looser: docs/CPU.md) or q8 (bf16, and int8 activations for the MXFP4 "
                "matmuls: faster decode, looser still) (default: $K3_PRECISION, else fp32)",
                "");
}

void apply_precision(const Args& args) {
  if (args.given("precision")) set_cpu_precision(args.str("precision"));
}

Option ctx_option(const std::string& help, const std::string& default_value, int64_t lo) {
  return Option("ctx-size", "c", "N", help, default_value).also("ctx").range(lo);
}

Option seed_option(const std::string& default_value, bool allow_random) {
  return Option(
             "seed", "s", "N",
             allow_random ? "random seed; -1 = random (printed with the timings)" : "random seed",
             default_value)
      .range(allow_random ? -1 : 0);
}

Option prompt_option(const std::string& help) { return Option("prompt", "p", "TEXT", help, ""); }

Option file_option(const std::string& help) { return Option("file", "f", "FILE", help, ""); }

std::string plural(int64_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string strip_prefix(const std::string& message, const std::string& command) {
  const std::string prefix = command + ": ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

}  // namespace k3::cli
