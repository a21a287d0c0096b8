#!/usr/bin/env bash
# Sanitizer runs, part of scripts/test.sh (see docs/FUZZING.md, "Sanitizers in CI").
#   scripts/sanitize.sh asan   ASan + UBSan build (build-asan/) of the library, the k3 command
#                              and the fast test subset below; any report fails the run
#   scripts/sanitize.sh tsan   TSan build (build-tsan/) of the threaded ops tests
# Built with the system compiler (GCC on CI); -O1 -g1, no CUDA and no pkg-config (no server, no
# libedit) keep the build, nearly all of each step's time, inside CI's 30 minutes on 2 cores.
# The subsets: ASAN_SUBSET below; TSan: test_ops and the pool tests of test_engine.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh asan|tsan}
jobs=$(nproc)

configure_and_build() {  # DIR FLAGS TARGET...
  local dir=$1 flags=$2
  shift 2
  # K3_CUDA=OFF: sanitizers see host code only, and CI needs no second CUDA compile. No
  # pkg-config: no server (cpp-httplib) and no libedit, whose builds CI cannot afford twice more;
  # the server's request parsing runs under ASan + UBSan in tests/fuzz/fuzz_server_request.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DK3_CUDA=OFF -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON >/dev/null
  local start=$SECONDS
  cmake --build "$dir" -j "$jobs" --target "$@"
  echo "== $kind: build took $((SECONDS - start)) s"
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

run_subset() {  # DIR ENTRY...
  local dir=$1 entry bin filter
  shift
  for entry in "$@"; do
    bin=${entry%%:*}
    filter=${entry#*:}
    echo "== $kind: $bin --gtest_filter=$filter"
    local start=$SECONDS
    "$dir/$bin" --gtest_filter="$filter" --gtest_brief=1
    echo "== $kind: $bin took $((SECONDS - start)) s"
  done
}

case $kind in
  asan)
    flags="-O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
    bins=()
    for e in "${ASAN_SUBSET[@]}"; do bins+=("${e%%:*}"); done
    configure_and_build build-asan "$flags" k3_cli "${bins[@]}"
    # Exit codes of their own: a sanitized `k3` that the CLI tests expect to exit 1 on bad
    # input must not pass by dying of a report.
    export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:exitcode=86
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87
    run_subset build-asan "${ASAN_SUBSET[@]}"
    ;;
  tsan)
    # libgomp is not TSan-instrumented (TSan would report races inside its barriers), so this
    # run is skipped while parallel_for uses OpenMP; it runs on the engine's own pool.
    if grep -qs 'omp.h' src/core/parallel.h src/core/threads.cpp; then
      echo "sanitize.sh tsan: SKIPPED: parallel_for (src/core/parallel.h) runs on OpenMP, whose"
      echo "  runtime libgomp is not TSan-instrumented, so TSan would report false races in it."
      exit 0
    fi
    configure_and_build build-tsan "-O1 -g1 -fsanitize=thread" test_ops test_engine
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:exitcode=88
    K3_THREADS=${K3_THREADS:-4} run_subset build-tsan "test_ops:*" \
      "test_engine:ThreadPool.*:ParallelFor.*"
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan" >&2
    exit 2
    ;;
esac
echo "sanitize.sh $kind: ok"
