#!/usr/bin/env bash
# Trains a default-model candidate on the GPU machine (`k3 train --device cuda`), driven through
# device calls of at most 10 minutes: the training runs in its own process session and goes on
# between calls while the machine stays held.
#   scripts/device-train-gpu.sh start CARRY   unpack k3 and the corpus, time the config, start
#   scripts/device-train-gpu.sh wait          report progress until this call's budget
#   scripts/device-train-gpu.sh finish        wait for the end, evaluate, pack the results
#   scripts/device-train-gpu.sh all CARRY     start and finish in one call
# CARRY (an ignored folder carried with the call; `scripts/gpu-pack.sh CARRY data/corpus`
# makes it) holds k3.xz (a stripped, xz-packed k3 built with CUDA from this tree), lib.tar.xz (its
# shared libraries the machine lacks) and corpus/{train,heldout}.txt.xz. Environment: CONFIG
# (configs/train-default-gpu2.json, whose vocabulary is the shipped tokenizer's), TRAIN_SECONDS
# (900), SEQ (512), BATCH (32), ACCUM (1: micro-batches a step, so the host's optimiser update
# runs once for ACCUM x BATCH windows), LR (4e-3), WARMUP (100), SCHEDULE (cosine),
# MIN_LR_RATIO (0.1), SEED (1), FROM (a model folder of the tree to train on from, e.g.
# models/default; without it a fresh `k3 init` of CONFIG), RESHAPE (a config FROM is reshaped
# to first, by scripts/reshape-model.py: fewer BPE ranks, more experts as twins of its own, a
# larger top-k), DEVICE (cuda; cpu to try
# the script on a machine without a GPU; also where the held-out score runs), EVAL_BYTES (the
# held-out bytes scored at the end: all). start and wait also bring home the last saved
# checkpoint, converted (snapshot.tgz.NN), in case the machine is not held to the end.
# Results go to $OUT: progress.txt, results.tgz (logs, curve, held-out evaluation) and
# model.tgz.NN (BF16 + MXFP4 experts, in pieces under the tool's 16 MiB file limit).
set -uo pipefail
cd "$(dirname "$0")/.."
phase=${1:?usage: device-train-gpu.sh start CARRY | wait | finish | all CARRY}
OUT=${OUT:-/tmp/k3-train-out}
W=/tmp/k3-gpu-train
K3=$W/k3
CALL_S=${CALL_S:-560}
START=$(date +%s)
mkdir -p "$OUT" "$W"
elapsed() { echo $(($(date +%s) - START)); }
running() { pgrep -f "k3 train" >/dev/null || pgrep -f "$W/run.sh" >/dev/null; }
progress() {
  { date +%T; cat "$W/plan.txt" 2>/dev/null; tr '\r' '\n' <"$W/train.log" 2>/dev/null | grep -a . | tail -3; } >"$OUT/progress.txt"
}

if [ "$phase" = start ] || [ "$phase" = all ]; then
  D=$PWD/${2:?start needs the CARRY folder}
  python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$D/k3.xz" "$K3"
  chmod +x "$K3"
  [ -d "$D/lib" ] || tar -C "$D" -xJf "$D/lib.tar.xz"
  cp -r "$D/lib" "$W/lib"
  mkdir -p "$W/corpus"
  for f in train.txt heldout.txt; do
    python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' \
      "$D/corpus/$f.xz" "$W/corpus/$f"
  done
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
  cat >"$W/run.sh" <<RUN
#!/usr/bin/env bash
set -uo pipefail
export LD_LIBRARY_PATH=$W/lib:/usr/local/cuda/lib64:\${LD_LIBRARY_PATH:-}
cd $PWD
CONFIG=${CONFIG:-configs/train-default-gpu2.json} SEQ=${SEQ:-512} BATCH=${BATCH:-32} ACCUM=${ACCUM:-1}
LR=${LR:-4e-3} WARMUP=${WARMUP:-100} TRAIN_SECONDS=${TRAIN_SECONDS:-900}
SCHEDULE=${SCHEDULE:-cosine} MIN_LR_RATIO=${MIN_LR_RATIO:-0.1} SEED=${SEED:-1} FROM=${FROM:-}
RESHAPE=${RESHAPE:-}
rm -rf $W/init
if [ -n "\$FROM" ] && [ -n "\$RESHAPE" ]; then
  python3 scripts/reshape-model.py "\$FROM" $W/init --config "\$RESHAPE" --new-experts twins >>$W/plan.txt 2>&1 || exit 1
elif [ -n "\$FROM" ]; then cp -r "\$FROM" $W/init || exit 1
else
  $K3 init --config \$CONFIG -o $W/init --seed 1 >/dev/null &&
    cp models/default/tiktoken.model models/default/tokenizer_config.json $W/init/ || exit 1
fi
train() { $K3 train -m $W/init --data $W/corpus/train.txt --val $W/corpus/heldout.txt \
  --seq-len \$SEQ --batch \$BATCH --accum \$ACCUM --warmup \$WARMUP --lr \$LR --schedule \$SCHEDULE \
  --min-lr-ratio \$MIN_LR_RATIO --device ${DEVICE:-cuda} -s \$SEED "\$@"; }
train -o $W/timing --steps 1000 --stop-after 30 --eval-every 100000 --log-every 10 >$W/timing.log 2>&1
tps=\$(grep -o '(30 steps, [0-9.]* tokens/s' $W/timing.log | grep -o '[0-9.]* tokens' | cut -d' ' -f1)
[ -n "\$tps" ] || { echo "timing run failed" >>$W/plan.txt; tail -5 $W/timing.log >>$W/plan.txt; exit 1; }
STEPS=\$(python3 -c "print(max(10, int(\$TRAIN_SECONDS * \$tps / (\$SEQ * \$BATCH * \$ACCUM))))")
echo "\${FROM:-\$CONFIG}\${RESHAPE:+ reshaped to \$RESHAPE}: \$tps tokens/s in the timing run -> \$STEPS steps of \$ACCUM x \$BATCH x \$SEQ, lr \$LR (\$SCHEDULE to \$MIN_LR_RATIO), warmup \$WARMUP, seed \$SEED" >>$W/plan.txt
train -o $W/run --steps \$STEPS --eval-every \$(((STEPS + 19) / 20)) --eval-windows 32 \
  --save-every 200 --log-every 20 >$W/train.log 2>&1
echo "training rc \$?" >>$W/plan.txt
RUN
  chmod +x "$W/run.sh"
  setsid nohup "$W/run.sh" >"$W/runner.log" 2>&1 </dev/null &
  sleep 5
fi

limit=$CALL_S
case $phase in finish | all) limit=$((CALL_S - 90)) ;; esac
while running && [ "$(elapsed)" -lt "$limit" ]; do progress; sleep 10; done
progress
cat "$OUT/progress.txt"
if [ "$phase" = start ] || [ "$phase" = wait ]; then
  # A lease can be taken back between calls: bring the last saved checkpoint home each time.
  if [ -f "$W/run/train_state.json" ]; then
    LD_LIBRARY_PATH=$W/lib:/usr/local/cuda/lib64 "$K3" convert -m "$W/run" -o "$W/snapshot" \
      --mxfp4 --force >"$W/snapshot.log" 2>&1 &&
      tar czf - -C "$W" snapshot | split -b 15m -d - "$OUT/snapshot.tgz." &&
      echo "snapshot of the last saved checkpoint in $OUT/snapshot.tgz.*"
  fi
  exit 0
fi
running && { echo "finish: still training after $(elapsed) s; packing the last saved state"; pkill -f "$W/run.sh"; pkill -f "k3 train"; sleep 2; }
export LD_LIBRARY_PATH=$W/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
"$K3" convert -m "$W/run" -o "$W/default" --mxfp4 --force >"$W/convert.log" 2>&1
head -c "${EVAL_BYTES:-100000000}" "$W/corpus/heldout.txt" >"$W/heldout-eval.txt"
"$K3" perplexity -m "$W/default" -f "$W/heldout-eval.txt" -c 512 -t "$(nproc)" --device "${DEVICE:-cuda}" --json >"$W/eval.json" 2>"$W/eval.log"
cat "$W/eval.json"
mkdir -p "$W/pack" && cp "$W"/*.log "$W"/*.json "$W/plan.txt" "$W/run/train_curve.svg" "$W/run"/*.json "$W/pack/" 2>/dev/null
tar czf "$OUT/results.tgz" -C "$W" pack
tar czf - -C "$W" default | split -b 15m -d - "$OUT/model.tgz."
ls -la "$OUT"
