#!/usr/bin/env python3
"""k3's logits against llama.cpp's on the same token ids: an independent check of the forward.

usage: compare_logits.py --model CKPT_DIR --gguf MODEL.gguf [--tokens 64] [--seed 1]
                         [--k3 build/bin/k3] [--dumper PATH] [--decode]

Both engines read the same weights (convert.py keeps BF16 and MXFP4 bytes as they are). The ids
are random text-token ids (below the first special id). Prints, over positions: argmax
agreement, the median and worst relative L2 error of a logits row, and the largest absolute
difference. llama.cpp computes its matmuls with activations rounded to bf16/Q8_0 and uses
eps 1e-5 in its MLA LoRA norms, so agreement is expected to be close, not exact.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import numpy as np


def fail(msg):
    sys.exit(f"compare_logits.py: {msg}")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        fail(f"{' '.join(cmd[:3])} ... exited {r.returncode}: {r.stderr.strip()[-600:]}")


def text_vocab_size(ckpt):
    with open(os.path.join(ckpt, "tiktoken.model"), "rb") as f:
        return sum(1 for line in f if line.strip())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.environ.get("LCPP_ROOT", os.path.expanduser("~/.cache/k3-llamacpp"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--decode", action="store_true", help="one token per step in both engines")
    ap.add_argument("--k3", default=os.path.join(here, "..", "..", "build", "bin", "k3"))
    ap.add_argument("--dumper", default=os.path.join(root, "src", "build", "bin", "llama-dump-logits"))
    ap.add_argument("-t", type=int, default=2)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ids = ",".join(str(rng.randrange(text_vocab_size(args.model))) for _ in range(args.tokens))
    with tempfile.TemporaryDirectory() as tmp:
        k3_out, llama_out = os.path.join(tmp, "k3.npy"), os.path.join(tmp, "llama.npy")
        mode = ["--decode"] if args.decode else []
        run([args.k3, "logits", "-m", args.model, "--ids", ids, "-o", k3_out, "-t", str(args.t)] + mode)
        run([args.dumper, "-m", args.gguf, "--ids", ids, "-o", llama_out, "-t", str(args.t)] + mode)
        a, b = np.load(k3_out).astype(np.float64), np.load(llama_out).astype(np.float64)
    if a.shape != b.shape:
        fail(f"shapes differ: k3 {a.shape}, llama.cpp {b.shape}")
    rel = np.linalg.norm(a - b, axis=1) / np.maximum(np.linalg.norm(a, axis=1), 1e-30)
    agree = int((a.argmax(axis=1) == b.argmax(axis=1)).sum())
    print(f"{os.path.basename(os.path.normpath(args.model))}: {a.shape[0]} positions "
          f"({'decode' if args.decode else 'prefill'}), argmax agreement {agree}/{a.shape[0]}, "
          f"relative L2 median {np.median(rel):.2e} worst {rel.max():.2e}, "
          f"max |diff| {np.abs(a - b).max():.3e} (logit scale {np.abs(a).max():.2f})")


if __name__ == "__main__":
    main()
