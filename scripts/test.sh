#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test (ops harness,
# golden models, bad input, CLI, tokenizer, cost, server; the server again with the openai
# Python client and its chat page in headless Chromium), then the sanitizer runs (ASan + UBSan on the
# fast subset, TSan on the threaded ops; docs/FUZZING.md). K3_SANITIZE=0 skips the latter.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/check-style.sh
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
./scripts/test-openai.sh   # k3 serve with the official openai client (venv from PyPI)
if [ "${K3_WEBPAGE:-1}" != 0 ]; then
  ./scripts/test-webpage.sh  # its chat page in headless Chromium (Selenium from PyPI)
fi
if [ "${K3_SANITIZE:-1}" != 0 ]; then
  ./scripts/sanitize.sh asan
  ./scripts/sanitize.sh tsan
fi
