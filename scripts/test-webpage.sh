#!/usr/bin/env bash
# The chat page of k3 serve end to end in headless Chromium (Debian chromium + chromium-driver,
# driven by Selenium from PyPI in build/webpage-venv): load, send, streamed text, thinking,
# tool calls, stop. Fails loudly, never skips, when it cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/serve_fixture.sh
SELENIUM_VERSION=4.40.0
[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] ||
  die "needs /usr/bin/chromium and /usr/bin/chromedriver (scripts/install-deps.sh installs them)"
VENV=build/webpage-venv
make_venv "$VENV" "import selenium; assert selenium.__version__ == '$SELENIUM_VERSION'" \
  "selenium==$SELENIUM_VERSION"

[ "${1:-}" = --venv-only ] && exit 0  # scripts/test.sh makes it while the build runs

work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill -KILL "$server" 2>/dev/null; rm -rf "$work"' EXIT
make_tiny_model "$work/model"
# 20 ms after each engine step (a test knob of k3 serve): the tiny model would otherwise write
# its whole 4096-token answer between two polls of the Stop test.
K3_SERVE_STEP_DELAY_MS=20 start_server "$work/log" -m "$work/model" -np 2 -c 4096 -t 2
status=0
"$VENV/bin/python" tests/server/test_chat_page.py "$url" || status=$?
[ "$status" = 0 ] || die "chat page tests failed (server log: $(tail -5 "$work/log.err"))"
stop_server
echo "test-webpage: ok (Chromium, selenium $SELENIUM_VERSION, against $url)"
