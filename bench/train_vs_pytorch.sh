#!/usr/bin/env bash
# Training throughput: `k3 train` against PyTorch eager running the Python reference
# (tests/reference/k3_torch.py, float32 autograd), same model, same threads, interleaved.
#
#   bench/train_vs_pytorch.sh [THREADS_LIST [ROUNDS]]     e.g. bench/train_vs_pytorch.sh 1,2 3
#
# Model: bench/train-small.json (d 128, 4 layers KKKM, 8 experts top-2 + 1 shared, two AttnRes
# blocks, vocabulary 512; the config of tests/train/test_train_perf.cpp) with a 512-id BPE
# trained on license texts. Each k3 step is a whole optimizer step (forward, backward, Muon +
# AdamW update, router balancing) over batch x 256 tokens, batch = threads (k3 runs one window
# per thread); PyTorch times forward + loss + backward only (no optimizer) on 256 tokens with
# torch.set_num_threads(threads): the comparison leaves out work on PyTorch's side, not ours.
# PyTorch is Debian's python3-torch (scripts/install-deps.sh); K3_PYTHON picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
K3=${K3:-build/bin/k3}
PY=${K3_PYTHON:-/usr/bin/python3}
THREADS=${1:-1,2}
ROUNDS=${2:-3}
work=${WORK:-build/train-vs-pytorch}
mkdir -p "$work"
if [ ! -f "$work/init/config.json" ]; then
  cat /usr/share/common-licenses/{GPL-3,LGPL-2.1,LGPL-3} >"$work/train.txt"
  "$K3" init --config bench/train-small.json -o "$work/init" --seed 3 >/dev/null 2>&1
  "$K3" tokenizer train -i "$work/train.txt" -o "$work/init" --vocab-size 512 -q
fi
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD), $(nproc) cores," \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# torch $("$PY" -c 'import torch; print(torch.__version__)')"
for t in ${THREADS//,/ }; do
  for round in $(seq "$ROUNDS"); do
    k3_tps=$("$K3" train -m "$work/init" --data "$work/train.txt" -o "$work/out" --seq-len 256 \
      --batch "$t" --steps 6 --warmup 1 --eval-every 1000 --log-every 1000 -t "$t" 2>&1 |
      grep -o '[0-9.]* tokens/s)' | tail -1 | cut -d' ' -f1)
    torch_tps=$("$PY" tests/reference/k3_torch.py "$work/init" --time 256 --threads "$t" |
      grep -o '[0-9]* tokens/s' | cut -d' ' -f1)
    echo "threads $t round $round: k3 train $k3_tps tokens/s, pytorch eager $torch_tps tokens/s"
  done
done
