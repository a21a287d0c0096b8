#!/usr/bin/env bash
# Sanitizer runs, part of scripts/test.sh (see docs/FUZZING.md, "Sanitizers in CI").
#   scripts/sanitize.sh asan   ASan + UBSan build (build-asan/) of the library, the k3 command
#                              and the fast test subset below; any report fails the run
#   scripts/sanitize.sh tsan   TSan build (build-tsan/) of the threaded ops tests
#   scripts/sanitize.sh all    both, the TSan build overlapping the ASan tests (what CI runs)
# Built with the system compiler (GCC on CI): -O0 (-O1: library, test_ops) -g1, no CUDA, no
# server and no libedit keep the build, most of each step's time, small on 2 cores.
# The subsets: ASAN_SUBSET below; TSan: test_ops (the op cases on the SIMD paths) and the pool
# tests of test_engine.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh asan|tsan|all}
jobs=$(nproc)

configure_and_build() {  # NAME DIR FLAGS TARGET...
  local name=$1 dir=$2 flags=$3
  shift 3
  # K3_CUDA=OFF: sanitizers see host code only, and CI needs no second CUDA compile.
  # K3_SERVER=OFF and no pkg-config: no server (cpp-httplib) and no libedit, whose builds CI
  # cannot afford twice more and which no test here runs; the server's request parsing runs
  # under ASan + UBSan in tests/fuzz/fuzz_server_request.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DK3_CUDA=OFF -DK3_SERVER=OFF \
    -DCMAKE_CXX_FLAGS="$flags" -DK3_HOT_OPT=-O1 -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON >/dev/null
  local start=$SECONDS
  cmake --build "$dir" -j "$jobs" --target "$@"
  echo "== $name: build took $((SECONDS - start)) s"
}

# Each entry: a test binary and its gtest filter. The subset: every op against its reference
# (ops), every loader and config check with the bad-input CLI runs (loader), the golden models
# with batches and snapshots (model; not the randomized many-sequence batch run, 330 s of the
# 350 s that test_model takes under ASan), the tokenizer, the chat format, and the CLI tests
# (cli), and the training tools (train: the tokenizer trainer reads untrusted text; not the
# whole-model gradient runs against PyTorch). Left out: engine, sample, cost (slow under ASan,
# and none reads untrusted input).
ASAN_SUBSET=(
  "test_ops:*"
  "test_loader:*"
  "test_model:*:-Cases/Batched.EverySequenceMatchesItsLoneRunAndTheReference/*"
  "test_tokenizer:*"
  "test_chat:*"
  "test_cli:*"
  "test_train:NewtonSchulz*:TrainMatmul*:Optimizer*:LrSchedule*:ParamGroups*:RouterBalance*:Bpe*:TrainedTokenizer*:Corpus*"
)

run_subset() {  # NAME DIR ENTRY...
  local name=$1 dir=$2 entry bin filter
  shift 2
  for entry in "$@"; do
    bin=${entry%%:*}
    filter=${entry#*:}
    echo "== $name: $bin --gtest_filter=$filter"
    local start=$SECONDS
    "$dir/$bin" --gtest_filter="$filter" --gtest_brief=1
    echo "== $name: $bin took $((SECONDS - start)) s"
  done
}

# -O0, and -O1 for the library and test_ops (K3_HOT_OPT in CMakeLists.txt), where the tests spend
# their run time: -O1 on the gtest- and json-heavy tools and other tests costs ~1.8x the compile.
ASAN_FLAGS="-O0 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
TSAN_FLAGS="-O0 -g1 -fsanitize=thread"

build_asan() {
  local bins=() e
  for e in "${ASAN_SUBSET[@]}"; do bins+=("${e%%:*}"); done
  configure_and_build asan build-asan "$ASAN_FLAGS" k3_cli "${bins[@]}"
}

run_asan() {
  # Exit codes of their own: a sanitized `k3` that the CLI tests expect to exit 1 on bad
  # input must not pass by dying of a report.
  ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:exitcode=86 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87 \
    run_subset asan build-asan "${ASAN_SUBSET[@]}"
}

# libgomp is not TSan-instrumented (TSan would report races inside its barriers), so the TSan
# run is skipped while parallel_for uses OpenMP; it runs on the engine's own pool.
tsan_skipped() {
  if grep -qs 'omp.h' src/core/parallel.h src/core/threads.cpp; then
    echo "sanitize.sh tsan: SKIPPED: parallel_for (src/core/parallel.h) runs on OpenMP, whose"
    echo "  runtime libgomp is not TSan-instrumented, so TSan would report false races in it."
    return 0
  fi
  return 1
}

build_tsan() {
  configure_and_build tsan build-tsan "$TSAN_FLAGS" test_ops test_engine
}

# One binary's tests in SHARDS processes at once (gtest sharding): a sanitized test process
# keeps little more than one core busy. A failing shard's log is printed.
run_sharded() {  # NAME DIR BIN FILTER SHARDS
  local name=$1 dir=$2 bin=$3 filter=$4 shards=$5 i rc=0 start=$SECONDS pids=()
  echo "== $name: $bin --gtest_filter=$filter in $shards shards"
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$dir/$bin" --gtest_filter="$filter" \
      --gtest_brief=1 >"$dir/$bin.shard$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { rc=$?; echo "== $name: $bin shard $i failed ($rc):"; cat "$dir/$bin.shard$i.log"; }
  done
  echo "== $name: $bin took $((SECONDS - start)) s"
  return "$rc"
}

# The ops split their work over the threads with parallel_for around the kernel, the same split
# for every ISA path, so the op cases run on the SIMD paths only where the machine has one (the
# scalar kernels run under ASan + UBSan and in ctest): 232 s of test_ops under TSan in one
# process become ~64 s (docs/FUZZING.md, "Sanitizers in CI").
run_tsan() {
  local filter="*" cases
  cases=$(build-tsan/test_ops --gtest_list_tests)
  if [[ $cases == *_cpu_avx2_* ]]; then
    filter="*:-Ops/OpTest.MatchesReference/*_cpu_scalar_*"
  fi
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:exitcode=88
  export K3_THREADS=${K3_THREADS:-4}
  run_sharded tsan build-tsan test_ops "$filter" $((jobs + 1))
  run_subset tsan build-tsan "test_engine:ThreadPool.*:ParallelFor.*"
}

case $kind in
  asan)
    build_asan
    run_asan
    ;;
  tsan)
    tsan_skipped && exit 0
    build_tsan
    run_tsan
    ;;
  all)
    # The ASan tests run mostly on one core: the TSan build takes the other (and what the tests
    # leave). Its log is printed when it ends; a failed build fails the run after the ASan tests.
    build_asan
    tsan=0
    if ! tsan_skipped; then
      tsan=1
      tsan_log=build-asan/tsan-build.log
      set -m  # the build gets a process group of its own, so that a failed ASan run ends it
      build_tsan >"$tsan_log" 2>&1 &
      tsan_pid=$!
      set +m
      trap 'kill -TERM -- "-$tsan_pid" 2>/dev/null || true' EXIT
    fi
    run_asan
    echo "sanitize.sh asan: ok"
    if [ "$tsan" = 1 ]; then
      tsan_rc=0
      wait "$tsan_pid" || tsan_rc=$?
      trap - EXIT
      cat "$tsan_log"
      [ "$tsan_rc" = 0 ] || { echo "sanitize.sh tsan: the build failed" >&2; exit "$tsan_rc"; }
      run_tsan
    fi
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan|all" >&2
    exit 2
    ;;
esac
echo "sanitize.sh $kind: ok"
