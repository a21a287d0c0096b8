#!/usr/bin/env bash
# Fresh machine to first output: install dependencies, build, make the default model if it is
# not there yet, describe it, and run it on a chat prompt.
# (Until the trained default model lands, the default model is a random-initialised K3-style
# checkpoint made by `k3 init` from configs/default.json.)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
K3_BUILD_TESTS=OFF ./scripts/build.sh
MODEL=${K3_MODEL:-models/default}
if [ ! -f "$MODEL/config.json" ]; then
  ./build/bin/k3 init --config configs/default.json -o "$MODEL" --seed 1 --mxfp4
fi
# The project's own byte-level BPE ranks (K3's tokenizer scheme, 6260 ranks + 256 specials).
for f in tiktoken.model tokenizer_config.json; do
  [ -f "$MODEL/$f" ] || cp "tests/data/tokenizer/$f" "$MODEL/$f"
done
./build/bin/k3 inspect -m "$MODEL"
# The main job: stream an answer in the chat format, with prefill/decode tokens/s at the end.
# (The default model is random-initialised, so the text is noise until a trained one lands.)
./build/bin/k3 run -m "$MODEL" --chat --thinking off -p "Say hello to k3.cpp." -n 48 --seed 1
echo
echo "quickstart: done. Try: build/bin/k3 chat -m $MODEL   (see docs/CLI.md)"
