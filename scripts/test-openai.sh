#!/usr/bin/env bash
# k3 serve against the official openai Python client: creates a venv (build/openai-venv, kept
# for the next run) with openai from PyPI, writes the tests' tiny model, starts `k3 serve` on a
# free loopback port with an API key, runs tests/server/test_openai_client.py and stops the
# server with SIGTERM (it must exit 0). Fails loudly, never skips, when it cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
K3=build/bin/k3
OPENAI_VERSION=3.57.0
die() { echo "test-openai: FAILED: $*" >&2; exit 1; }
[ -x "$K3" ] || die "$K3 is not built (run scripts/build.sh)"

VENV=build/openai-venv
if ! "$VENV/bin/python" -c "import openai; assert openai.__version__ == '$OPENAI_VERSION'" \
    2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV" || die "cannot create a venv (Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install -q "openai==$OPENAI_VERSION" ||
    die "pip could not install openai==$OPENAI_VERSION (is PyPI reachable?)"
fi

work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -KILL "$server"; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The tiny chat model of the C++ tests (tests/common/tiny_model.h holds its config).
python3 - "$work/tiny.json" <<'PY'
import re, sys
src = open("tests/common/tiny_model.h").read()
open(sys.argv[1], "w").write(re.search(r'kTinyChatConfig = R"\((.*?)\)";', src, re.S).group(1))
PY
"$K3" init --config "$work/tiny.json" -o "$work/model" --seed 7 >/dev/null 2>"$work/init.err" ||
  die "k3 init failed: $(cat "$work/init.err")"
cp tests/data/tokenizer/tiktoken.model tests/data/tokenizer/tokenizer_config.json "$work/model/"

key="test-key-$$"
"$K3" serve -m "$work/model" --port 0 -np 4 -c 2048 -t 2 --api-key "$key" \
  >"$work/out" 2>"$work/err" &
server=$!
url=""
for _ in $(seq 600); do  # up to 60 s for the startup line
  url=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$work/out")
  [ -n "$url" ] && break
  kill -0 "$server" 2>/dev/null || die "k3 serve exited at startup: $(cat "$work/err")"
  sleep 0.1
done
[ -n "$url" ] || die "k3 serve printed no startup line in 60 s"

status=0
"$VENV/bin/python" tests/server/test_openai_client.py "$url" "$key" || status=$?
kill -TERM "$server"
rc=0
wait "$server" || rc=$?
server=""
[ "$status" = 0 ] || die "openai client tests failed (server log: $(tail -5 "$work/err"))"
[ "$rc" = 0 ] || die "k3 serve exited $rc on SIGTERM"
echo "test-openai: ok (openai $OPENAI_VERSION against $url)"
