#!/usr/bin/env bash
# k3 serve against the official openai Python client: a venv (build/openai-venv, kept for the
# next run) with openai from PyPI, the tests' tiny model, `k3 serve` on a free loopback port
# with an API key, tests/server/test_openai_client.py, then SIGTERM (the server must exit 0).
# Fails loudly, never skips, when it cannot run. --venv-only: make the venv, then stop.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/serve_fixture.sh
OPENAI_VERSION=3.57.0
VENV=build/openai-venv
make_venv "$VENV" "import openai; assert openai.__version__ == '$OPENAI_VERSION'" \
  "openai==$OPENAI_VERSION"

[ "${1:-}" = --venv-only ] && exit 0  # scripts/test.sh makes it while the build runs

work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill -KILL "$server" 2>/dev/null; rm -rf "$work"' EXIT
make_tiny_model "$work/model"
key="test-key-$$"
start_server "$work/log" -m "$work/model" -np 4 -c 2048 -t 2 --api-key "$key"
status=0
"$VENV/bin/python" tests/server/test_openai_client.py "$url" "$key" || status=$?
[ "$status" = 0 ] || die "openai client tests failed (server log: $(tail -5 "$work/log.err"))"
stop_server
echo "test-openai: ok (openai $OPENAI_VERSION against $url)"
