#!/usr/bin/env bash
# The device call of the GPU training path (issue 11): build, the TrainCuda tests, and the
# training throughput on the default model's config, GPU against the host's CPU.
# Run on the GPU machine from the repository root; logs go to $OUT.
#   K3_GPU_DEPS=DIR      a CMake prefix with nlohmann_json and GTest (scripts/gpu-carry.sh)
#   K3_TRAIN_TEXT=FILE   training text for the throughput runs (default: the README)
#   K3_GPU_TESTS=PATTERN gtest filter (default 'TrainCuda*')
#   K3_BENCH_STEPS=N     GPU steps of the throughput run (default 40)
#   K3_SKIP_BENCH=1      the tests alone
#   K3_GPU_PREBUILT=DIR  skip the build: DIR holds test_train and bin/k3 (built with this tree;
#                        the GPU machine lacks libcpp-httplib and libedit: carry them and put
#                        their folder on LD_LIBRARY_PATH; the tests find their data through the
#                        source path they were built in, so link it to this tree)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/k3-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
START=$(date +%s)
log() { echo "[$(date +%T) +$(($(date +%s) - START))s] $*" | tee -a "$OUT/summary.txt"; }
log "commit $(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$OUT/summary.txt" 2>&1
B=build-gpu
if [ -n "${K3_GPU_PREBUILT:-}" ]; then  # binaries built elsewhere; their source paths must resolve
  B=$K3_GPU_PREBUILT
  log "prebuilt binaries from $B"
elif ! { cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DK3_CUDA=ON \
    -DCMAKE_PREFIX_PATH="${K3_GPU_DEPS:-}" &&
  cmake --build "$B" -j16 --target k3_cli test_train; } >"$OUT/build.log" 2>&1; then
  log "build failed (build.log)"
  tail -40 "$OUT/build.log"
  exit 1
fi
log "build done"
"$B/test_train" --gtest_filter="${K3_GPU_TESTS:-TrainCuda*}" >"$OUT/tests.log" 2>&1
log "tests rc=$? ($(grep -c '^\[       OK' "$OUT/tests.log") ok, $(grep -c '^\[  FAILED' "$OUT/tests.log") failed lines)"
grep -E "FAILED|GPU vs CPU|error|Failure" "$OUT/tests.log" | head -40 | tee -a "$OUT/summary.txt"

[ "${K3_SKIP_BENCH:-0}" = 1 ] && { log "done (no benchmark)"; exit 0; }
K3="$B/bin/k3"
text=${K3_TRAIN_TEXT:-README.md}
init=/tmp/k3-train-init
rm -rf "$init"
"$K3" init --config configs/train-default.json -o "$init" --seed 1 >/dev/null &&
  cp models/default/tiktoken.model models/default/tokenizer_config.json "$init/"
steps=${K3_BENCH_STEPS:-40}
for batch in 16 64; do
  log "GPU: --batch $batch, $steps steps of 256 tokens"
  "$K3" train -m "$init" --data "$text" -o /tmp/k3-gpu-run --seq-len 256 --batch "$batch" \
    --steps "$steps" --warmup 5 --lr 2e-3 --device cuda --log-every 10 2>&1 |
    tee -a "$OUT/bench.log" | tail -3 | tee -a "$OUT/summary.txt"
done
log "GPU: --batch 64, Newton-Schulz on the host (K3_TRAIN_NS_ON_DEVICE=0)"
K3_TRAIN_NS_ON_DEVICE=0 "$K3" train -m "$init" --data "$text" -o /tmp/k3-gpu-run --seq-len 256 \
  --batch 64 --steps "$steps" --warmup 5 --lr 2e-3 --device cuda --log-every 10 2>&1 |
  tee -a "$OUT/bench.log" | tail -3 | tee -a "$OUT/summary.txt"
log "GPU: --batch 64, the pass profile (K3_TRAIN_PROFILE=1)"
K3_TRAIN_PROFILE=1 "$K3" train -m "$init" --data "$text" -o /tmp/k3-gpu-run --seq-len 256 \
  --batch 64 --steps 20 --warmup 5 --lr 2e-3 --device cuda --log-every 10 2>&1 |
  tee -a "$OUT/bench.log" | tail -18 | tee -a "$OUT/summary.txt"
log "CPU: -t 16 --batch 16, 3 steps"
"$K3" train -m "$init" --data "$text" -o /tmp/k3-cpu-run --seq-len 256 --batch 16 --steps 3 \
  -t 16 --log-every 1 2>&1 | tee -a "$OUT/bench.log" | tail -2 | tee -a "$OUT/summary.txt"
log "done"
