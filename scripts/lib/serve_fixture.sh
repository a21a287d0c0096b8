# Sourced by the scripts that test `k3 serve` from outside (test-openai.sh, test-webpage.sh):
# a venv with pinned PyPI packages, the tests' tiny model, a server on a free loopback port.
# Every failure stops the script loudly (die); the caller sets `set -euo pipefail`.
K3=build/bin/k3
die() { echo "$(basename "$0"): FAILED: $*" >&2; exit 1; }
need_k3() { [ -x "$K3" ] || die "$K3 is not built (run scripts/build.sh)"; }

# make_venv DIR CHECK PACKAGE...: a venv at DIR where python -c CHECK passes, else a new one.
make_venv() {
  local dir=$1 check=$2
  shift 2
  if "$dir/bin/python" -c "$check" 2>/dev/null; then return; fi
  rm -rf "$dir"
  python3 -m venv "$dir" || die "cannot create a venv (Debian: apt-get install python3-venv)"
  "$dir/bin/pip" install -q "$@" || die "pip could not install $* (is PyPI reachable?)"
  "$dir/bin/python" -c "$check" || die "the venv at $dir fails: $check"
}

# make_tiny_model DIR: the tiny chat model of the C++ tests (config in tests/common/tiny_model.h).
make_tiny_model() {
  local dir=$1
  need_k3
  python3 - "$dir.json" <<'PY'
import re, sys
src = open("tests/common/tiny_model.h").read()
open(sys.argv[1], "w").write(re.search(r'kTinyChatConfig = R"\((.*?)\)";', src, re.S).group(1))
PY
  "$K3" init --config "$dir.json" -o "$dir" --seed 7 >/dev/null 2>"$dir.err" ||
    die "k3 init failed: $(cat "$dir.err")"
  cp tests/data/tokenizer/tiktoken.model tests/data/tokenizer/tokenizer_config.json "$dir/"
}

# start_server LOG ARGS...: starts k3 serve --port 0 ARGS in the background; sets $server (pid)
# and $url from its startup line (waits up to 60 s).
start_server() {
  local log=$1
  shift
  need_k3
  : >"$log"  # exists before the child opens it (the startup-line poll reads it at once)
  "$K3" serve --port 0 "$@" >"$log" 2>"$log.err" &
  server=$!
  url=""
  for _ in $(seq 600); do
    url=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$log")
    [ -n "$url" ] && return
    kill -0 "$server" 2>/dev/null || die "k3 serve exited at startup: $(cat "$log.err")"
    sleep 0.1
  done
  die "k3 serve printed no startup line in 60 s"
}

# stop_server: SIGTERM; k3 serve must exit 0.
stop_server() {
  local rc=0
  kill -TERM "$server"
  wait "$server" || rc=$?
  server=""
  [ "$rc" = 0 ] || die "k3 serve exited $rc on SIGTERM"
}
