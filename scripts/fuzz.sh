#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang, ASan and UBSan into build-fuzz/ and runs
# each for SECONDS (default 60) from a seed corpus made of tests/data. See docs/FUZZING.md.
#   scripts/fuzz.sh [SECONDS] [TARGET...]    targets: safetensors config tokenizer
#                                            tokenizer_files chat_parser server_request
#                                            (default: all)
# Corpora grow in build-fuzz/corpus/TARGET; findings land in build-fuzz/findings/TARGET.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors config tokenizer tokenizer_files chat_parser server_request)
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt install clang)" >&2; exit 1; }

flags="-O1 -g1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link"
# The targets read files and text only: the ops, model, engine and CUDA stay out of this build.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Fuzz \
  -DK3_FUZZ=ON -DK3_BUILD_TESTS=OFF -DK3_NATIVE=OFF -DK3_CUDA=OFF -DCMAKE_CXX_FLAGS="$flags" \
  -DK3_EXCLUDE_REGEX="src/(ops|model|engine|backend|eval|api|sample)/" >/dev/null
ninja -C build-fuzz $(printf 'fuzz_%s ' "${targets[@]}")

# Seeds: the committed test data, cut to what each target reads.
seed() {
  local target=$1 dir=build-fuzz/seeds/$1
  rm -rf "$dir" && mkdir -p "$dir"
  case $target in
    safetensors) for f in tests/data/models/*/*.safetensors; do  # each shard's small tensors
        python3 - "$f" "$dir/$(basename "$(dirname "$f")")_$(basename "$f")" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
out, blob = {}, b""
for name, t in header.items():
    if name == "__metadata__" or t["data_offsets"][1] - t["data_offsets"][0] > 512:
        continue
    b, e = t["data_offsets"]
    out[name] = dict(t, data_offsets=[len(blob), len(blob) + e - b])
    blob += data[b:e]
text = json.dumps(out).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + blob)
PY
      done ;;
    config) for f in tests/data/models/*/config.json; do
        cp "$f" "$dir/$(basename "$(dirname "$f")").json"; done ;;
    tokenizer) for f in tests/data/models/*/tokens.json tests/data/tokenizer/tokenizer_config.json \
        tests/fuzz/seeds/text/*; do cp "$f" "$dir/"; done ;;
    tokenizer_files) { head -c 4000 tests/data/tokenizer/tiktoken.model; printf '\0';
        cat tests/data/tokenizer/tokenizer_config.json; } >"$dir/fixture" ;;
    chat_parser) cp tests/fuzz/seeds/chat/* "$dir/" ;;
    server_request) cp tests/fuzz/seeds/server/* "$dir/" ;;
  esac
}

export K3_FUZZ_TOKENIZER_DIR=${K3_FUZZ_TOKENIZER_DIR:-$PWD/tests/data/tokenizer}
status=0
for t in "${targets[@]}"; do
  seed "$t"
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/findings/$t"
  echo "== fuzz_$t for ${seconds}s"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  if ! "build-fuzz/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=25 \
      -max_len=65536 "${dict[@]}" \
      -artifact_prefix="build-fuzz/findings/$t/" -print_final_stats=1 \
      "build-fuzz/corpus/$t" "build-fuzz/seeds/$t" 2>"build-fuzz/fuzz_$t.log"; then
    echo "fuzz.sh: fuzz_$t found a problem: see build-fuzz/fuzz_$t.log and build-fuzz/findings/$t" >&2
    status=1
  fi
  grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "build-fuzz/fuzz_$t.log" || true
done
exit $status
