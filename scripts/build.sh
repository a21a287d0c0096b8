#!/usr/bin/env bash
# Configures and builds k3.cpp (library, `k3` command, tests) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DK3_BUILD_TESTS="${K3_BUILD_TESTS:-ON}" >/dev/null
cmake --build build -j "$(nproc)"
