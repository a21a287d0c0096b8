#!/usr/bin/env bash
# The shared-machine goal of issue 12: with one competing CPU-bound process per core, `k3 bench`
# at the default thread count must not be slower than at -t 1. Starts one busy loop per
# logical CPU, runs default-threads and -t 1 benches interleaved (A B A B ...), stops the busy
# loops, prints every run's prefill / decode tok/s.
#   bench/contention.sh [K3] [MODEL_DIR] [ROUNDS]
set -euo pipefail
k3=${1:-build/bin/k3}
model=${2:-models/default}
rounds=${3:-5}
hogs=()
stop_hogs() { for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT
for _ in $(seq "$(nproc)"); do
  (while :; do :; done) &
  hogs+=("$!")
done
run() {  # LABEL ARGS...
  local label=$1
  shift
  "$k3" bench -m "$model" -p 128 -n 32 -r 3 -o csv "$@" | awk -F, -v l="$label" 'NR > 1 {print l, $5, $6}'
}
for _ in $(seq "$rounds"); do
  run default
  run t1 -t 1
done
