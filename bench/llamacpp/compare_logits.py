#!/usr/bin/python3
"""k3's logits against llama.cpp's on the same token ids: an independent check of the forward.

usage: compare_logits.py --model CKPT_DIR --gguf MODEL.gguf [--tokens 64] [--seed 1]
                         [--k3 build/bin/k3] [--k3-args "--precision bf16"] [--dumper PATH] [--decode]

Both engines read the same weights (convert.py keeps BF16 and MXFP4 bytes as they are). The ids
are random text-token ids (below the first special id). Prints, over positions: argmax
agreement, the median and worst relative L2 error of a logits row, and the largest absolute
difference. llama.cpp computes its matmuls with activations rounded to bf16/Q8_0 and uses
eps 1e-5 in its MLA LoRA norms, so agreement is expected to be close, not exact.
"""
import argparse
import json
import os
import shlex
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
    """Ids below this are ordinary text tokens in both the tokenizer and the model."""
    with open(os.path.join(ckpt, "tiktoken.model"), "rb") as f:
        ranks = sum(1 for line in f if line.strip())
    with open(os.path.join(ckpt, "config.json")) as f:
        config = json.load(f)
    return min(ranks, config.get("text_config", config)["vocab_size"])


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
    ap.add_argument("--k3-args", default="", help="more k3 logits flags, e.g. '--precision bf16'")
    ap.add_argument("--dumper", default=os.path.join(root, "src", "build", "bin", "llama-dump-logits"))
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--reference", action="store_true",
                    help="also run the float64 NumPy reference (tests/reference/k3_ref.py) and "
                         "measure both engines against it: which one a disagreement is on")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ids = ",".join(str(rng.randrange(text_vocab_size(args.model))) for _ in range(args.tokens))
    with tempfile.TemporaryDirectory() as tmp:
        k3_out, llama_out = os.path.join(tmp, "k3.npy"), os.path.join(tmp, "llama.npy")
        mode = ["--decode"] if args.decode else []
        run([args.k3, "logits", "-m", args.model, "--ids", ids, "-o", k3_out, "-t", str(args.t)] + mode
            + shlex.split(args.k3_args))
        run([args.dumper, "-m", args.gguf, "--ids", ids, "-o", llama_out, "-t", str(args.t)] + mode)
        a, b = np.load(k3_out).astype(np.float64), np.load(llama_out).astype(np.float64)
        ref = None
        if args.reference:
            ref_out = os.path.join(tmp, "ref.npy")
            script = os.path.join(here, "..", "..", "tests", "reference", "k3_ref.py")
            run([sys.executable, script, args.model, "--ids", ids, "-o", ref_out] + mode)
            ref = np.load(ref_out).astype(np.float64)
    if a.shape != b.shape:
        fail(f"shapes differ: k3 {a.shape}, llama.cpp {b.shape}")
    name = os.path.basename(os.path.normpath(args.model))
    print(f"{name}: {a.shape[0]} positions ({'decode' if args.decode else 'prefill'}), "
          f"k3 vs llama.cpp: {describe(a, b)}")
    if ref is not None:
        print(f"{name}: k3 vs float64 reference: {describe(ref, a)}")
        print(f"{name}: llama.cpp vs float64 reference: {describe(ref, b)}")


def describe(want, got):
    """Argmax agreement and the relative L2 error of each logits row of `got` against `want`."""
    rel = np.linalg.norm(got - want, axis=1) / np.maximum(np.linalg.norm(want, axis=1), 1e-30)
    agree = int((want.argmax(axis=1) == got.argmax(axis=1)).sum())
    return (f"argmax agreement {agree}/{want.shape[0]}, relative L2 median {np.median(rel):.2e} "
            f"worst {rel.max():.2e} (at position {int(rel.argmax())}), "
            f"max |diff| {np.abs(got - want).max():.3e} (logit scale {np.abs(want).max():.2f})")


if __name__ == "__main__":
    main()
