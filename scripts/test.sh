#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test (ops harness,
# golden models, bad input, CLI, tokenizer, cost, server; the server again with the openai
# Python client and its chat page in headless Chromium), then the sanitizer runs (ASan + UBSan on the
# fast subset, TSan on the threaded ops; docs/FUZZING.md). K3_SANITIZE=0 skips the latter.
# Each step prints its wall time; the steps that overlap say so (docs/FUZZING.md, "CI time").
set -euo pipefail
cd "$(dirname "$0")/.."
step() {  # NAME COMMAND...: runs COMMAND, then prints its wall time
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "== test.sh: $name took $((SECONDS - start)) s"
}
step install-deps ./scripts/install-deps.sh
step check-style ./scripts/check-style.sh
# The client tests' venvs come from PyPI: pip mostly waits on the network, so they are made while
# the build runs. A failure here only prints; the tests themselves retry and then fail loudly.
webpage=${K3_WEBPAGE:-1}
venv_log=$(mktemp)
(
  ./scripts/test-openai.sh --venv-only
  if [ "$webpage" != 0 ]; then ./scripts/test-webpage.sh --venv-only; fi
) >"$venv_log" 2>&1 &
venv_pid=$!
step build ./scripts/build.sh
step ctest ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
wait "$venv_pid" || { echo "test.sh: making the venvs failed:"; cat "$venv_log"; }
rm -f "$venv_log"
step test-openai ./scripts/test-openai.sh  # k3 serve with the official openai client (venv from PyPI)
if [ "$webpage" != 0 ]; then
  step test-webpage ./scripts/test-webpage.sh  # its chat page in headless Chromium (Selenium from PyPI)
fi
if [ "${K3_SANITIZE:-1}" != 0 ]; then
  step sanitize ./scripts/sanitize.sh all  # the TSan build overlaps the ASan tests
fi
