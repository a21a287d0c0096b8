#!/usr/bin/env bash
# Runs on the GPU machine's host CPU (16-core AMX Xeon) through the `device` tool: the test
# binaries (AVX-512 paths), then `k3 bench` before/after on the default model and the
# full-width 4-layer slice, and batched decode. Expects builds carried in .devcarry/: bin/k3 and
# tests/test_* of this commit, k3_before of the baseline, lib/ with the runtime libraries they
# need (built here with -march=x86-64-v4, K3_NATIVE=OFF). Writes logs to $OUT.
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /work
[ -e /work/main ] || ln -s "$ROOT" /work/main   # the test binaries look for /work/main/tests
export LD_LIBRARY_PATH=$ROOT/.devcarry/lib
mkdir -p build-dev && ln -sfn ../.devcarry/bin build-dev/bin  # where the tests expect the CLI
NEW=.devcarry/bin/k3
OLD=.devcarry/k3_before
T=${T:-16}
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200 > "$OUT/cpu.txt"
{
  echo "== tests"
  ls .devcarry/tests/test_* | grep -v '\.log$' | xargs -P 8 -I{} sh -c '{} > {}.log 2>&1; echo "$? {}"'
  grep -h -E "PASSED|FAILED" .devcarry/tests/*.log
} 2>&1 | tee "$OUT/tests.txt"
cat .devcarry/tests/*.log > "$OUT/tests_full.log"
$NEW init --config configs/default.json -o /tmp/default --seed 1 --mxfp4 >/dev/null
$NEW init --config bench/k3-slice-4layer-32experts.json -o /tmp/slice --seed 1 >/dev/null
{
  for bin in $OLD $NEW; do
    echo "== $bin default model, -t $T"
    $bin bench -m /tmp/default -p 128 -n 32 -r 5 -t $T
    echo "== $bin full-width slice, -t $T"
    $bin bench -m /tmp/slice -p 64 -n 8 -r 3 -t $T
  done
  for b in 1 8 32; do
    echo "== $NEW default model, batch $b, -t $T"
    $NEW bench -m /tmp/default -p 16 -n 32 -b $b -r 5 -t $T
  done
  for b in 1 4; do
    echo "== $NEW full-width slice, batch $b, -t $T"
    $NEW bench -m /tmp/slice -p 16 -n 4 -b $b -r 3 -t $T
  done
} 2>&1 | tee "$OUT/bench.txt"
