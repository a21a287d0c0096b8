#!/usr/bin/env bash
# The serving benchmark: `k3 serve` on the default-sized model (k3 init --config
# configs/default.json), loopback load from loadgen.py at concurrency 1, 4, 16 and 64 (one wave
# of requests each), with the prefix cache on and off, plus the TTFT of requests sharing a
# ~1000-token system prompt. Bounded: fixed request counts, a timeout on every run.
#   bench/serve/run.sh [MAX_TOKENS [REPEATS]]   (MODEL=DIR: another model; SERVE_ARGS: more
#   k3 serve flags; K3=PATH: another k3 binary; CONCURRENCY="1 16": the concurrencies (default 1 4 16 64); CACHES="64":
#   the prefix cache sizes in MiB (default 64 0); SHARED=0: skip the shared-prompt TTFT runs).
#   Prints one JSON line per run; bench/serve/summarize.py makes the table.
set -euo pipefail
cd "$(dirname "$0")/../.."
K3=${K3:-build/bin/k3}
MODEL=${MODEL:-build/bench-default}
TOKENS=${1:-64}
REPEATS=${2:-3}
if [ ! -f "$MODEL/config.json" ]; then
  "$K3" init --config configs/default.json -o "$MODEL" --seed 1
  cp tests/data/tokenizer/tiktoken.model tests/data/tokenizer/tokenizer_config.json "$MODEL/"
fi
# Ban the stop ids so that every answer runs to max_tokens (a random model ends at random).
ban=$("$K3" tokenize -m "$MODEL" -p "<|end_of_msg|>[EOS]" | tr -s ' ' ',')
out=$(mktemp)
server=""
trap '[ -n "$server" ] && kill -KILL "$server" 2>/dev/null; rm -f "$out"' EXIT

start() {
  # shellcheck disable=SC2086
  "$K3" serve -m "$MODEL" --port 0 -np 64 --queue 256 -c 4096 ${SERVE_ARGS:-} "$@" >"$out" 2>&1 &
  server=$!
  url=""
  for _ in $(seq 300); do
    url=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$out")
    [ -n "$url" ] && return
    sleep 0.1
  done
  echo "run.sh: k3 serve did not start: $(cat "$out")" >&2
  exit 1
}
stop() { kill -TERM "$server"; wait "$server"; server=""; }

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), k3 serve ${SERVE_ARGS:-}"
for cache in ${CACHES:-64 0}; do
  start --cache-mb "$cache"
  # One untimed request first: the first one after start pages the weights in.
  timeout 300 python3 bench/serve/loadgen.py --url "$url" --max-tokens 8 --ban "$ban" \
    --seed 99 >/dev/null
  echo "## prefix cache: $([ "$cache" = 0 ] && echo off || echo "on (${cache} MiB)")"
  echo "{\"cache_mb\": $cache}"
  for rep in $(seq "$REPEATS"); do
    for c in ${CONCURRENCY:-1 4 16 64}; do
      timeout 900 python3 bench/serve/loadgen.py --url "$url" --concurrency "$c" \
        --max-tokens "$TOKENS" --ban "$ban" --seed "$rep" --server-pid "$server"
    done
    [ "${SHARED:-1}" = 0 ] || timeout 900 python3 bench/serve/loadgen.py --url "$url" \
      --shared-prefix 240 --requests 4 --ban "$ban" --seed "$rep"
  done
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  stop
done
