#!/usr/bin/env bash
# Fresh machine to first output: install dependencies, build, describe the bundled default model
# (models/default: a small K3 trained from scratch with `k3 train`, see docs/TRAINING.md) and let
# it continue a prompt.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
K3_BUILD_TESTS=OFF ./scripts/build.sh
MODEL=${K3_MODEL:-models/default}
if [ ! -f "$MODEL/config.json" ]; then
  echo "quickstart: $MODEL is missing (it ships with the repository: git checkout -- models/default)" >&2
  exit 1
fi
./build/bin/k3 inspect -m "$MODEL"
# The main job: stream a completion, with prefill/decode tokens/s at the end. The default model
# is a base model trained on 290 M tokens of English from Debian packages (manuals, two Bibles,
# Austen, Moby-Dick, WordNet, four games' prose): expect English with some sentence shape, not sense.
./build/bin/k3 run -m "$MODEL" -p "The meaning of life is" -n 64 --seed 1
echo
echo "quickstart: done. Try: build/bin/k3 run -p \"Once upon a time\" -n 100   (see docs/CLI.md)"
