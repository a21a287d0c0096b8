#!/usr/bin/env bash
# The one device call of the CUDA backend (issue 13): build, CPU + GPU tests, benchmarks.
# Run on the GPU machine from the repository root; logs go to $OUT (at most 8 files).
#   scripts/gpu-check.sh            build into build-gpu/ (Release, -j16), then test and bench
#   K3_GPU_BUILD=DIR scripts/...    use an existing build (e.g. one made here and carried)
#   K3_GPU_DEPS=DIR                 a CMake prefix with nlohmann_json and GTest (scripts/gpu-carry.sh)
#   K3_GPU_FALLBACK=DIR             a carried build to use if the build here fails
#   K3_GPU_SKIP_E2E=1               leave out the 12 GB slice (k3 init + end-to-end bench)
#   K3_GPU_OPS_FILTER=PATTERN       gtest filter of the GPU op cases (default '*_cuda_*')
#   K3_GPU_SKIP_CPU=1               leave out the CPU tests (test_engine, CPU op cases)
#   K3_GPU_SANITIZE=PATTERN         also run compute-sanitizer (racecheck, then memcheck) over
#                                   these op cases (e.g. '*kda_chunked*_cuda_*')
#   K3_GPU_PROFILE=1                after the e2e bench, one decode step under ncu per batch of
#                                   K3_GPU_PROFILE_BATCHES (default 1)
#                                   (per-kernel durations in $OUT/ncu.csv)
#   K3_GPU_FLA="bf16 decode"        at the end, fla's chunk_kda / fused_recurrent_kda at the same
#                                   shapes (bench/cuda/fla_kda.py; fla-core and einops wheels in
#                                   .whl/, carried: see docs/CUDA.md)
#   K3_GPU_PROFILE=prefill          instead one bf16 8K prefill under ncu (ncu.csv, and the
#                                   per-kernel totals in $OUT/kernels.txt)
# The end-to-end slice is written under /tmp (about 12 GB; never carried).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/k3-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
B=${K3_GPU_BUILD:-build-gpu}
SLICE=/tmp/k3-slice-4layer
START=$(date +%s)
BUDGET_S=${K3_GPU_BUDGET_S:-560}  # the device tool stops a command at 600 s
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
log() { echo "[$(date +%T) +$(($(date +%s) - START))s] $*" | tee -a "$OUT/summary.txt"; }

log "commit $(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
  >>"$OUT/summary.txt" 2>&1
nproc >>"$OUT/summary.txt"

# The slice is CPU work: write it while the build and tests run.
if [ "${K3_GPU_SKIP_E2E:-0}" != 1 ]; then
  (
    while [ ! -s "$OUT/.k3" ]; do sleep 2; done  # the main script names the k3 to use
    K3=$(cat "$OUT/.k3")
    [ "$K3" = none ] && exit 0
    rm -rf "$SLICE"
    t0=$(date +%s)
    "$K3" init --config bench/k3-slice-4layer-32experts.json -o "$SLICE" --seed 1 --mxfp4 --force
    rc=$?
    echo "k3 init: $(($(date +%s) - t0)) s, rc $rc"
  ) >"$OUT/init.log" 2>&1 &
  INIT_PID=$!
fi

if [ -x "$B/test_ops" ]; then
  echo "$B/bin/k3" >"$OUT/.k3"
else
  log "build $B"
  CPU_TESTS=test_engine
  [ "${K3_GPU_SKIP_CPU:-0}" = 1 ] && CPU_TESTS=
  # The k3 command first, so that writing the slice can start while the rest builds.
  if { cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DK3_CUDA=ON -DK3_WERROR=OFF \
      -DCMAKE_PREFIX_PATH="${K3_GPU_DEPS:-}" &&
    cmake --build "$B" -j16 --target k3_cli && echo "$B/bin/k3" >"$OUT/.k3" &&
    cmake --build "$B" -j16 --target test_ops test_model k3_bench_cuda $CPU_TESTS; } \
    >"$OUT/build.log" 2>&1; then
    log "build done"
  elif [ -n "${K3_GPU_FALLBACK:-}" ] && [ -x "$K3_GPU_FALLBACK/test_ops" ]; then
    log "build failed (build.log): using the carried build $K3_GPU_FALLBACK"
    B=$K3_GPU_FALLBACK
    [ -s "$OUT/.k3" ] || echo "$B/bin/k3" >"$OUT/.k3"
  else
    log "build failed (build.log)"
    echo none >"$OUT/.k3"
    tail -30 "$OUT/build.log"
    exit 1
  fi
fi

run_test() {  # NAME FILTER TIMEOUT
  local name=$1 filter=$2 t=$3
  timeout "$t" "$B/$name" --gtest_filter="$filter" >/tmp/k3-test-run.log 2>&1
  local rc=$?
  cat /tmp/k3-test-run.log >>"$OUT/tests.log"
  log "$name $filter: rc $rc, $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+ test|^\[  SKIPPED \] [0-9]+' /tmp/k3-test-run.log | tr '\n' ' ')"
  grep -E '^\[  FAILED  \] ' /tmp/k3-test-run.log | head -20 >>"$OUT/summary.txt"
}
log "tests"
run_test test_ops "${K3_GPU_OPS_FILTER:-*_cuda_*}" 120
if [ -n "${K3_GPU_SANITIZE:-}" ]; then
  for tool in racecheck memcheck; do
    timeout 60 compute-sanitizer --tool "$tool" "$B/test_ops" --gtest_filter="$K3_GPU_SANITIZE" \
      >"$OUT/sanitize-$tool.log" 2>&1
    log "compute-sanitizer $tool: rc $?, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool.log" | tr '\n' ' ')"
  done
fi
run_test test_model '*CudaStep*' 200
grep -E "gpu vs cpu|all cases so far|decode vs prefill|graphs:" "$OUT/tests.log" | tail -20 >>"$OUT/summary.txt"

log "bench ops"
timeout 200 "$B/bin/k3-bench-cuda" ops >"$OUT/bench.txt" 2>&1
log "bench ops rc $?"
COPY=$(awk '/^copy d2d/ {for (i = 2; i <= NF; ++i) if ($i == "GB/s") print $(i - 1)}' "$OUT/bench.txt")

if [ "${K3_GPU_SKIP_E2E:-0}" != 1 ]; then
  wait "$INIT_PID"
  tail -2 "$OUT/init.log" >>"$OUT/summary.txt"
  if [ "$(left)" -gt 60 ]; then
    log "bench e2e (copy ${COPY:-?} GB/s), $(left) s left"
    timeout "$(($(left) - 10))" "$B/bin/k3-bench-cuda" e2e "$SLICE" 8192 "${COPY:-4227}" \
      >>"$OUT/bench.txt" 2>&1
    log "bench e2e rc $?"
    if [ "${K3_GPU_PROFILE:-0}" = prefill ] && [ "$(left)" -gt 50 ]; then
      log "ncu: one bf16 prefill of 8192 tokens"
      K3_E2E_PROFILE=prefill K3_BENCH_E2E_PREFILL_ONLY=1 timeout "$(($(left) - 10))" ncu \
        --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
        "$B/bin/k3-bench-cuda" e2e "$SLICE" 8192 "${COPY:-4227}" >"$OUT/ncu.csv" 2>&1
      log "ncu rc $?"
      python3 scripts/ncu-summary.py "$OUT/ncu.csv" >"$OUT/kernels.txt" 2>&1
      head -25 "$OUT/kernels.txt" >>"$OUT/summary.txt"
    fi
    if [ "${K3_GPU_PROFILE:-0}" = 1 ] && [ "$(left)" -gt 50 ]; then
      log "ncu: one batch-1 decode step"
      K3_E2E_PROFILE=1 K3_E2E_BATCHES=${K3_GPU_PROFILE_BATCHES:-1} timeout "$(($(left) - 10))" ncu --profile-from-start off \
        --clock-control none --metrics gpu__time_duration.sum --csv \
        "$B/bin/k3-bench-cuda" e2e "$SLICE" 0 "${COPY:-4227}" >"$OUT/ncu.csv" 2>&1
      log "ncu rc $?"
    fi
  else
    log "bench e2e skipped: $(left) s left"
  fi
fi
if [ -n "${K3_GPU_FLA:-}" ] && [ "$(left)" -gt 40 ]; then
  log "fla side by side: $K3_GPU_FLA, $(left) s left"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/fla-site .whl/*.whl >"$OUT/fla.txt" 2>&1 &&
    PYTHONPATH=/tmp/fla-site PYTHONUNBUFFERED=1 timeout "$(($(left) - 15))" \
      python3 bench/cuda/fla_kda.py $K3_GPU_FLA >>"$OUT/fla.txt" 2>&1
  log "fla rc $?"
  cat "$OUT/fla.txt" >>"$OUT/bench.txt"
fi
# The CPU tests last (they run here too; on the device host they check the AVX-512 paths).
if [ "${K3_GPU_SKIP_CPU:-0}" != 1 ] && [ "$(left)" -gt 40 ]; then
  run_test test_engine '*' $(($(left) / 2))
  run_test test_ops '-*_cuda_*' $(($(left) - 5))
fi
cat "$OUT/bench.txt" >>"$OUT/summary.txt"
rm -f "$OUT/.k3"
cat "$OUT/summary.txt"
