#!/usr/bin/env bash
# How the shipped default model was trained: scripts/train-default.sh on a 16-core host (the GPU
# machine's CPU), driven through device calls of at most 10 minutes each. The training runs in
# its own process session, so it continues between calls while the machine stays held.
#   scripts/device-train-default.sh start CARRY   build k3, unpack the corpus, start training
#   scripts/device-train-default.sh wait          report progress until this call's budget
#   scripts/device-train-default.sh finish        wait for the end, evaluate, pack the results
# CARRY (an ignored folder carried with the call) holds deps/ (scripts/gpu-carry.sh) and
# corpus/{train,heldout}.txt.{xz,gz}, and optionally tokenizer/ (a tokenizer trained elsewhere, used
# instead of training one there). RUNS, THREADS (per run, default 4), BATCH and TRAIN_SECONDS
# pass through to scripts/train-default.sh. Results go to $OUT: progress.txt, results.tgz (logs, curves,
# training states, the held-out evaluation) and model.tgz.NN (the default model converted to
# BF16 + MXFP4 experts, in pieces under the tool's 16 MiB file limit).
set -uo pipefail
cd "$(dirname "$0")/.."
phase=${1:?usage: device-train-default.sh start CARRY | wait | finish}
OUT=${OUT:-/tmp/k3-train-out}
W=/tmp/k3-train
K3=$W/build/bin/k3
CALL_S=${CALL_S:-570}
START=$(date +%s)
mkdir -p "$OUT" "$W"
elapsed() { echo $(($(date +%s) - START)); }

progress() {
  {
    date +%T
    cat "$W/runs/plan.txt" 2>/dev/null
    for f in "$W"/runs/*.log; do
      [ -f "$f" ] && echo "$(basename "$f"): $(tr '\r' '\n' <"$f" | grep -a . | tail -1)"
    done
  } >"$OUT/progress.txt"
}
running() { pgrep -f "scripts/train-default.sh" >/dev/null; }

case $phase in
  start)
    D=$PWD/${2:?start needs the CARRY folder}
    nproc
    lscpu | grep -E 'Model name|Flags' | cut -c1-200
    cmake -S . -B "$W/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DK3_CUDA=OFF \
      -DK3_BUILD_TESTS=OFF -DK3_WERROR=OFF -DCMAKE_PREFIX_PATH="$D/deps" >"$OUT/build.log" 2>&1 &&
      cmake --build "$W/build" --target k3_cli -j"$(nproc)" >>"$OUT/build.log" 2>&1 ||
      { tail -30 "$OUT/build.log"; exit 1; }
    echo "built in $(elapsed) s"
    mkdir -p "$W/corpus"
    for f in train heldout; do  # .xz or .gz
      if [ -f "$D/corpus/$f.txt.xz" ]; then
        python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' \
          "$D/corpus/$f.txt.xz" >"$W/corpus/$f.txt"
      else
        zcat "$D/corpus/$f.txt.gz" >"$W/corpus/$f.txt"
      fi
    done
    if [ -s "$D/tokenizer/tiktoken.model" ]; then
      mkdir -p "$W/runs" && cp -r "$D/tokenizer" "$W/runs/tokenizer"
    fi
    setsid nohup env K3="$K3" DATA="$W/corpus" TRAIN_SECONDS="${TRAIN_SECONDS:-1100}" \
      THREADS="${THREADS:-4}" \
      scripts/train-default.sh "$W/runs" >"$W/train.log" 2>&1 </dev/null &
    ;;
  wait | finish) ;;
  *)
    echo "unknown phase $phase" >&2
    exit 2
    ;;
esac

limit=$CALL_S
[ "$phase" = finish ] && limit=$((CALL_S - 60))
while running && [ "$(elapsed)" -lt "$limit" ]; do
  progress
  sleep 10
done
progress
cat "$OUT/progress.txt"
[ "$phase" = finish ] || exit 0
if running; then
  echo "finish: training still running after $(elapsed) s; packing what is there"
fi

# Held-out evaluation of every run on the same slice of the held-out text, and the default
# model converted to the shipped format (and evaluated again, as shipped).
head -c 100000 "$W/corpus/heldout.txt" >"$W/heldout-slice.txt"
"$K3" convert -m "$W/runs/k3-qb" -o "$W/default" --mxfp4 --force >"$W/convert.log" 2>&1
for m in k3-qb k3-lossfree k3-none dense; do
  [ -d "$W/runs/$m" ] || continue
  "$K3" perplexity -m "$W/runs/$m" -f "$W/heldout-slice.txt" -c 512 -t 4 --json \
    >"$W/runs/eval-$m.json" 2>/dev/null &
done
"$K3" perplexity -m "$W/default" -f "$W/heldout-slice.txt" -c 512 -t 4 --json \
  >"$W/runs/eval-default-shipped.json" 2>/dev/null &
wait
cp "$W/convert.log" "$W/train.log" "$W/runs/"
(cd "$W/runs" && tar czf "$OUT/results.tgz" --exclude='*.safetensors' --exclude='init-*' \
  --exclude='tokenizer' .)
tar czf - -C "$W" default | split -b 15m -d - "$OUT/model.tgz."
ls -la "$OUT"
cat "$W"/runs/eval-*.json
