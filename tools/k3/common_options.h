// The options several `k3` commands share, declared once so that each has the same spelling,
// help and range check everywhere: -t/--threads, -c/--ctx-size, -s/--seed, -p/--prompt,
// -f/--file (and -m/--model in model_dir.h). Also small message helpers.
#pragma once

#include <cstdint>
#include <string>

#include "args.h"

namespace k3::cli {

// -t, --threads N (1..1024; default: physical cores). apply_threads() sets it when given.
Option threads_option();
void apply_threads(const Args& args);
// --device cpu|cuda (default: $K3_DEVICE, else cpu). apply_device() checks and sets it when
// given: "cuda" without a usable CUDA device is an error saying which is missing.
Option device_option();
void apply_device(const Args& args);
// --precision fp32|bf16 (default: $K3_PRECISION, else fp32): the CPU matmuls' arithmetic
// (k3/model.h set_cpu_precision). apply_precision() sets it when given.
Option precision_option();
void apply_precision(const Args& args);
// -c, --ctx-size N (>= lo), also spelled --ctx.
Option ctx_option(const std::string& help, const std::string& default_value, int64_t lo = 1);
// -s, --seed N (>= 0; with allow_random, -1 asks for a random seed).
Option seed_option(const std::string& default_value, bool allow_random = false);
// -p, --prompt TEXT and -f, --file FILE.
Option prompt_option(const std::string& help);
Option file_option(const std::string& help);

// "1 token", "2 tokens".
std::string plural(int64_t n, const std::string& word);
// A library message without a leading "<command>: " ("perplexity: the stride ..." -> "the
// stride ..."), so that main's "k3 perplexity: error: " prefix is not doubled.
std::string strip_prefix(const std::string& message, const std::string& command);

}  // namespace k3::cli
