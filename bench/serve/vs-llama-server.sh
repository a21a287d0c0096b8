#!/usr/bin/env bash
# k3 serve and llama-server side by side: the same model (a k3 checkpoint and its GGUF made by
# llama.cpp's own converter), the same thread count, the same slots and context per slot, the
# same load (loadgen.py, /v1/completions with the same plain prompts, greedy, every answer run
# to MAX_TOKENS: the stop ids banned and ignore_eos), at concurrency 1, 4 and 16, the two
# servers interleaved within every repeat. Prints one JSON line per run (labelled k3 / llama);
# bench/serve/summarize.py makes the table.
#   LLAMA_SERVER=PATH GGUF=FILE bench/serve/vs-llama-server.sh [MAX_TOKENS [REPEATS]]
#   (MODEL=DIR: the k3 checkpoint, default models/default; THREADS=N: -t of both, default 1;
#   CONCURRENCY="1 4 16")
set -euo pipefail
cd "$(dirname "$0")/../.."
K3=${K3:-build/bin/k3}
MODEL=${MODEL:-models/default}
THREADS=${THREADS:-1}
TOKENS=${1:-64}
REPEATS=${2:-3}
SLOTS=16
CTX=1024  # per slot: ~60 prompt tokens + MAX_TOKENS
: "${LLAMA_SERVER:?set LLAMA_SERVER to the llama-server binary}"
: "${GGUF:?set GGUF to the model as a .gguf file}"
ban=$("$K3" tokenize -m "$MODEL" -p "<|end_of_msg|>[EOS]" | tr -s ' ' ',')
k3_log=$(mktemp) llama_log=$(mktemp)
k3_pid="" llama_pid=""
cleanup() {
  for p in $k3_pid $llama_pid; do kill -KILL "$p" 2>/dev/null || true; done
  rm -f "$k3_log" "$llama_log"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_health() {  # URL LOG
  for _ in $(seq 600); do
    curl -sf "$1health" >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "vs-llama-server.sh: the server at $1 did not start: $(tail -5 "$2")" >&2
  exit 1
}

k3_port=$(free_port)
"$K3" serve -m "$MODEL" --host 127.0.0.1 --port "$k3_port" -t "$THREADS" -np "$SLOTS" \
  -c "$CTX" >"$k3_log" 2>&1 &
k3_pid=$!
llama_port=$(free_port)
"$LLAMA_SERVER" -m "$GGUF" --host 127.0.0.1 --port "$llama_port" -t "$THREADS" -tb "$THREADS" \
  -np "$SLOTS" -c $((SLOTS * CTX)) --no-webui >"$llama_log" 2>&1 &
llama_pid=$!
k3_url="http://127.0.0.1:$k3_port/" llama_url="http://127.0.0.1:$llama_port/"
wait_health "$k3_url" "$k3_log"
wait_health "$llama_url" "$llama_log"
for url in "$k3_url" "$llama_url"; do  # one untimed request each: the first pages weights in
  timeout 300 python3 bench/serve/loadgen.py --url "$url" --endpoint completions --ignore-eos \
    --ban "$ban" --max-tokens 8 --seed 99 >/dev/null
done

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), -t $THREADS, $SLOTS slots x $CTX context, $TOKENS tokens"
echo "# k3: $("$K3" --version 2>&1 | head -1); llama-server: $("$LLAMA_SERVER" --version 2>&1 | grep -m1 version || true)"
echo "{\"cache_mb\": 64}"
for rep in $(seq "$REPEATS"); do
  for c in ${CONCURRENCY:-1 4 16}; do
    for side in k3 llama; do
      url=$k3_url pid=$k3_pid
      [ "$side" = llama ] && url=$llama_url pid=$llama_pid
      timeout 900 python3 bench/serve/loadgen.py --url "$url" --endpoint completions \
        --ignore-eos --ban "$ban" --concurrency "$c" --max-tokens "$TOKENS" --seed "$rep" \
        --label "$side" --server-pid "$pid"
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
