#!/usr/bin/env bash
# Op micro-benchmarks: the op harness in perf mode (tests/ops, PerfCase), release shapes,
# median of 7 runs after a warm-up. Needs a build with tests (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "commit $(git rev-parse --short HEAD)  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
build/test_ops --gtest_also_run_disabled_tests --gtest_filter='OpPerf.*' | grep -v '^\['
