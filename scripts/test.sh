#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test (ops harness,
# golden models, bad input, CLI, tokenizer, cost).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/check-style.sh
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
