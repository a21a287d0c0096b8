#!/usr/bin/env bash
# CPU forward throughput with `k3 bench` (median of repeats), for bench/RESULTS.md.
# Usage: bench/cpu_forward.sh [MODEL_DIR] [PROMPT] [GEN] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-models/default}
P=${2:-128}; N=${3:-32}; R=${4:-5}
echo "commit $(git rev-parse --short HEAD)  date $(date -u +%Y-%m-%dT%H:%MZ)"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB"
for t in 1 "$(nproc)"; do
  echo "\$ build/bin/k3 bench -m $MODEL -p $P -n $N -r $R -t $t"
  build/bin/k3 bench -m "$MODEL" -p "$P" -n "$N" -r "$R" -t "$t" | tail -2
done
