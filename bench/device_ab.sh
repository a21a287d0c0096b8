#!/usr/bin/env bash
# Interleaved A/B of the baseline and this commit on the device host CPU (see device_cpu.sh for
# the carried builds): the same `k3 bench` commands, alternating binaries, three rounds.
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$ROOT/.devcarry/lib
NEW=.devcarry/bin/k3
OLD=.devcarry/k3_before
[ -d /tmp/default ] || $NEW init --config configs/default.json -o /tmp/default --seed 1 --mxfp4 >/dev/null
[ -d /tmp/slice ] || $NEW init --config bench/k3-slice-4layer-32experts.json -o /tmp/slice --seed 1 >/dev/null
{
  for round in 1 2 3; do
    for t in 16 4; do
      for bin in $OLD $NEW; do
        echo "== round $round $bin default -p 128 -n 32 -t $t"
        $bin bench -m /tmp/default -p 128 -n 32 -r 5 -t $t | tail -2
      done
    done
  done
  for round in 1 2; do
    for bin in $OLD $NEW; do
      echo "== round $round $bin slice -p 64 -n 8 -t 16"
      $bin bench -m /tmp/slice -p 64 -n 8 -r 3 -t 16 | tail -2
    done
  done
  for b in 1 8 32; do
    echo "== $NEW default -p 128 -n 32 -b $b -t 16"
    $NEW bench -m /tmp/default -p 128 -n 32 -b $b -r 5 -t 16 | tail -3
  done
} 2>&1 | tee "$OUT/ab.txt"
