#!/usr/bin/env bash
# Trains the project's default model and the three runs docs/TRAINING.md compares it with, all
# at once and the same way (same tokenizer, data order, steps, schedule and initial weights):
#   k3-qb        configs/train-default.json, Quantile Balancing   (the default model)
#   k3-lossfree  the same K3, Loss-Free balancing
#   k3-none      the same K3, no balancing
#   dense        configs/train-default-dense.json: every layer a dense SiTU-GLU MLP of the same
#                active parameter count
# The step count is chosen so the runs end within a wall-clock budget: a short timing run of
# all four at once measures tokens/s first.
#
#   scripts/train-default.sh OUT_DIR
# Environment:
#   K3=path/to/k3          (default: build/bin/k3)
#   DATA=dir               train.txt and heldout.txt (default: data/corpus; scripts/make-corpus.sh)
#   TRAIN_SECONDS=N        wall-clock budget of the training proper (default: 3600)
#   THREADS=N              threads per run (default: nproc / 4, at least 1)
#   RUNS="k3-qb ..."       a subset of the four (default: all)
#   STEPS=N                skip the timing run and train N steps
#   SEQ, BATCH, LR, WARMUP window length (256), windows per step (8), peak lr (4e-3), warmup (30)
# Writes OUT_DIR/tokenizer, OUT_DIR/<run>/ (k3 train checkpoints with train_curve.svg),
# OUT_DIR/<run>.log, OUT_DIR/plan.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/train-default.sh OUT_DIR}
K3=${K3:-build/bin/k3}
DATA=${DATA:-data/corpus}
TRAIN_SECONDS=${TRAIN_SECONDS:-3600}
THREADS=${THREADS:-$(($(nproc) / 4 > 0 ? $(nproc) / 4 : 1))}
RUNS=${RUNS:-k3-qb k3-lossfree k3-none dense}
SEQ=${SEQ:-256} BATCH=${BATCH:-8} LR=${LR:-4e-3} WARMUP=${WARMUP:-30}
TOKENS_PER_STEP=$((SEQ * BATCH))
for f in "$DATA/train.txt" "$DATA/heldout.txt"; do
  [ -s "$f" ] || { echo "train-default: $f is missing (run scripts/make-corpus.sh)" >&2; exit 1; }
done
mkdir -p "$out"
log() { echo "[$(date +%T)] $*" | tee -a "$out/plan.txt"; }

config_of() { [ "$1" = dense ] && echo configs/train-default-dense.json || echo configs/train-default.json; }
balance_of() {
  case $1 in k3-qb) echo qb ;; k3-lossfree) echo lossfree ;; *) echo none ;; esac
}

if [ ! -s "$out/tokenizer/tiktoken.model" ]; then
  "$K3" tokenizer train -i "$DATA/train.txt" -o "$out/tokenizer" --vocab-size 8192 -q
fi
for run in $RUNS; do  # the same seed: the three K3 runs start from the same weights
  if [ ! -s "$out/init-$run/config.json" ]; then
    rm -rf "$out/init-$run"
    "$K3" init --config "$(config_of "$run")" -o "$out/init-$run" --seed 1 >/dev/null
    cp "$out/tokenizer"/* "$out/init-$run/"
  fi
done

train() {  # run steps stop-after output [extra flags]
  local run=$1 steps=$2 stop=$3 dst=$4
  shift 4
  "$K3" train -m "$out/init-$run" --data "$DATA/train.txt" --val "$DATA/heldout.txt" -o "$dst" \
    --seq-len $SEQ --batch $BATCH --steps "$steps" --stop-after "$stop" --warmup $WARMUP \
    --lr $LR --balance "$(balance_of "$run")" -t "$THREADS" -s 1 "$@"
}

if [ -z "${STEPS:-}" ]; then  # time 4 steps of every run at once, as they will run
  for run in $RUNS; do train "$run" 100 4 "$out/timing-$run" --eval-every 1000 >"$out/timing-$run.log" 2>&1 & done
  wait
  slowest=$(for run in $RUNS; do
    grep -o 'wrote .*(4 steps, [0-9.]* tokens/s' "$out/timing-$run.log" | grep -o '[0-9.]* tokens/s' | cut -d' ' -f1
  done | sort -g | head -1)
  rm -rf "$out"/timing-*/
  STEPS=$(python3 -c "print(max(10, int($TRAIN_SECONDS * $slowest / $TOKENS_PER_STEP)))")
  log "timing: slowest run $slowest tokens/s at -t $THREADS with all runs at once -> $STEPS steps"
fi
log "runs: $RUNS; $STEPS steps x $TOKENS_PER_STEP tokens (seq $SEQ, batch $BATCH), lr $LR, warmup $WARMUP, cosine, -t $THREADS"
EVAL_EVERY=$(((STEPS + 19) / 20))
for run in $RUNS; do
  train "$run" "$STEPS" 0 "$out/$run" --eval-every "$EVAL_EVERY" --eval-windows 16 \
    --log-every 10 >"$out/$run.log" 2>&1 &
done
wait
for run in $RUNS; do log "$run: $(tail -1 "$out/$run.log")"; done
