#!/usr/bin/env bash
# k3.cpp and llama.cpp's `kimi-k3` side by side on one GPU, on the full-width 4-layer slice
# (issue 13, goal (e)): batch-1 decode, aggregate decode at 16 and 64 sequences, prefill of 8K.
# Run on the GPU machine from the repository root, in one go (it fits one 10-minute device call):
#
#   LCPP_SRC=llama-src.tar.xz bench/llamacpp/gpu_side_by_side.sh
#
# env: LCPP_SRC   llama.cpp's source: the llama-cpp-python 0.3.36 sdist (.tar.gz, which vendors
#                 it), a tarball of that sdist's vendor/llama.cpp (.tar.xz; 5 MB once docs, models
#                 and other backends are dropped: small enough to carry), or a directory
#      K3_BUILD   a k3 build (bin/k3, bin/k3-bench-cuda); built into build-gpu if missing
#      K3_DEPS    CMake prefix with nlohmann_json and GTest for that build (scripts/gpu-carry.sh)
#      WORK       where the slice (12 GB), its GGUF (9 GB) and llama.cpp's build go (/tmp/k3-side)
#      K3_EXTRA_TARGETS  more k3 targets to build with it (e.g. test_model)
#      OUT        logs (default $WORK/out); summary.txt holds every number
# llama.cpp is built for this GPU (CUDA, flash attention, all layers on the GPU) while k3 builds
# and the slice is written and converted with llama.cpp's own converter (bench/llamacpp/convert.py:
# bf16 trunk, native MXFP4 experts). Nothing of llama.cpp lands in this repository.
set -uo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/k3-side}
OUT=${OUT:-$WORK/out}
B=${K3_BUILD:-build-gpu}
SLICE=$WORK/slice
GGUF=$WORK/slice.gguf
LROOT=$WORK/lcpp
LBUILD=$LROOT/src/build
mkdir -p "$WORK" "$OUT" "$LROOT"
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
START=$(date +%s)
log() { echo "[$(date +%T) +$(($(date +%s) - START))s] $*" | tee -a "$OUT/summary.txt"; }

unpack_llamacpp() {
  [ -f "$LROOT/src/CMakeLists.txt" ] && return
  local src=${LCPP_SRC:?set LCPP_SRC to llama.cpp sources (see the header)}
  rm -rf "$LROOT/src" "$LROOT/unpack" && mkdir -p "$LROOT/unpack"
  case "$src" in
  *.tar.gz) tar xzf "$src" -C "$LROOT/unpack" && mv "$LROOT"/unpack/*/vendor/llama.cpp "$LROOT/src" ;;
  *.tar.xz) tar xJf "$src" -C "$LROOT/unpack" && mv "$LROOT/unpack/llama.cpp" "$LROOT/src" ;;
  *) cp -r "$src" "$LROOT/src" ;;
  esac
}

build_llamacpp() {
  [ -x "$LBUILD/bin/llama-batched-bench" ] && return
  cmake -S "$LROOT/src" -B "$LBUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF &&
    nice -n 5 cmake --build "$LBUILD" -j"$(nproc)" --target llama-bench llama-batched-bench
}

build_k3() {
  [ -x "$B/bin/k3-bench-cuda" ] && [ -x "$B/bin/k3" ] && return
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DK3_CUDA=ON -DK3_WERROR=OFF \
    -DCMAKE_PREFIX_PATH="${K3_DEPS:-}" &&
    cmake --build "$B" -j"$(nproc)" --target k3_cli k3_bench_cuda ${K3_EXTRA_TARGETS:-}
}

# The slice (k3 init) and its GGUF (llama.cpp's converter), in the background of the builds.
make_models() {
  [ -f "$GGUF" ] && return
  local t0
  t0=$(date +%s)
  [ -f "$SLICE/config.json" ] ||
    "$B/bin/k3" init --config bench/k3-slice-4layer-32experts.json -o "$SLICE" --seed 1 --mxfp4 \
      --force || return 1
  echo "k3 init: $(($(date +%s) - t0)) s"
  t0=$(date +%s)
  LCPP_ROOT=$LROOT python3 bench/llamacpp/convert.py "$SLICE" "$GGUF" || return 1
  echo "convert: $(($(date +%s) - t0)) s"
}

log "k3 commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$OUT/summary.txt"
unpack_llamacpp || { log "llama.cpp sources: failed"; exit 1; }
(build_llamacpp >"$OUT/llamacpp-build.log" 2>&1; echo "rc $?" >>"$OUT/llamacpp-build.log") &
LPID=$!
build_k3 >"$OUT/k3-build.log" 2>&1 || { log "k3 build failed"; tail -20 "$OUT/k3-build.log"; exit 1; }
log "k3 built"
make_models >"$OUT/models.log" 2>&1 || { log "slice or GGUF failed"; tail -20 "$OUT/models.log"; exit 1; }
log "models: $(grep -E '^(k3 init|convert):' "$OUT/models.log" | tr '\n' ' ') $(du -sh "$SLICE" "$GGUF" | awk '{print $1}' | tr '\n' ' ')"
wait "$LPID"
log "llama.cpp build: $(tail -1 "$OUT/llamacpp-build.log")"
[ -x "$LBUILD/bin/llama-bench" ] || { tail -30 "$OUT/llamacpp-build.log"; exit 1; }

K3B=$B/bin/k3-bench-cuda
LB=$LBUILD/bin
COPY=$(K3_BENCH_ONLY=ceilings "$K3B" ops 2>&1 |
  awk '/^copy d2d/ {for (i = 2; i <= NF; ++i) if ($i == "GB/s") print $(i - 1)}')
log "copy ${COPY:-?} GB/s"
for round in $(seq "${ROUNDS:-1}"); do
  log "round $round: k3 (fp32 decode; prefill fp32 and bf16)"
  timeout 150 "$K3B" e2e "$SLICE" 8192 "${COPY:-4227}" >>"$OUT/k3.txt" 2>&1
  grep -E "^decode batch|prefill" "$OUT/k3.txt" | tail -6 >>"$OUT/summary.txt"
  log "round $round: llama-bench (batch 1 decode, prefill 8K)"
  timeout 150 "$LB/llama-bench" -m "$GGUF" -ngl 99 -fa 1 -p 8192 -n 128 -r 3 >>"$OUT/llama.txt" 2>&1
  grep -E "pp8192|tg128" "$OUT/llama.txt" | tail -2 >>"$OUT/summary.txt"
  log "round $round: llama-batched-bench (16-token prompts, 128 decoded, 1/16/64 sequences)"
  timeout 150 "$LB/llama-batched-bench" -m "$GGUF" -ngl 99 -fa on -kvu -c 9400 -b 2048 -ub 512 \
    -npp 16 -ntg 128 -npl 1,16,64 >>"$OUT/llama.txt" 2>&1
  grep -E "^\|\s+16 \|" "$OUT/llama.txt" | tail -3 >>"$OUT/summary.txt"
  log "round $round: k3 in bf16 precision (decode and prefill)"
  K3_PRECISION=bf16 K3_E2E_PRECISIONS=bf16 timeout 150 "$K3B" e2e "$SLICE" 8192 "${COPY:-4227}" \
    >>"$OUT/k3-bf16.txt" 2>&1
  grep -E "^decode batch|prefill" "$OUT/k3-bf16.txt" | tail -4 >>"$OUT/summary.txt"
done
python3 bench/llamacpp/gpu_table.py "$OUT" | tee -a "$OUT/summary.txt"
log "done"
