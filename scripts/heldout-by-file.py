#!/usr/bin/env python3
"""Bits per byte of a model on each fortune file of the held-out text (standard library only).

  heldout-by-file.py EVAL.json MODEL_DIR CORPUS_DIR

EVAL.json is `k3 perplexity -f CORPUS_DIR/heldout.txt --json` (its per-window scores),
MODEL_DIR holds the tiktoken.model it was scored with, CORPUS_DIR is what
scripts/make-corpus.sh wrote (heldout.txt, and root/ with the unpacked fortune packages).
heldout.txt is rebuilt entry by entry as make-corpus.sh builds it, so each byte is known to
come from one file; each window's log-likelihood is spread evenly over the tokens it scored
(the JSON holds windows, not tokens), and each token counts for the file its first byte is in.
Prints one line per file, largest first: bytes, bits per byte."""
import base64
import glob
import json
import math
import os
import subprocess
import sys

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, SCRIPTS)
import corpus_text  # noqa: E402


def entries_by_file(corpus):
    """(file name, entry) in heldout.txt's order, as corpus_text.fortunes writes them."""
    files = sorted(f for p in ("fortunes", "fortunes-min")
                   for f in glob.glob(f"{corpus}/root/{p}/usr/share/games/fortunes/**",
                                      recursive=True)
                   if os.path.isfile(f) and not f.endswith((".dat", ".u8")))
    return [(os.path.basename(path), e) for path, e in corpus_text.fortune_entries(files)]


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    windows = json.load(open(argv[1]))["windows"]
    model, corpus = argv[2], argv[3]
    pieces = {}
    for line in open(f"{model}/tiktoken.model", "rb"):
        b64, rank = line.split()
        pieces[int(rank)] = len(base64.b64decode(b64))
    entries = entries_by_file(corpus)
    heldout = open(f"{corpus}/heldout.txt", "rb").read()
    if "\n".join(e for _, e in entries).encode() != heldout:
        sys.exit("heldout-by-file: heldout.txt is not the fortunes as make-corpus.sh joins them")
    owner = []  # owner[byte] = file index, via the entries' byte ranges
    names = sorted({name for name, _ in entries})
    for i, (name, e) in enumerate(entries):
        owner += [names.index(name)] * (len(e.encode()) + (i + 1 < len(entries)))
    k3 = os.path.join(SCRIPTS, "..", "build", "bin", "k3")
    ids = json.loads(subprocess.run([k3, "tokenize", "-m", model, "-f", f"{corpus}/heldout.txt",
                                     "--json"], capture_output=True, check=True).stdout)
    start = [0]
    for t in ids:
        start.append(start[-1] + pieces[t])
    nll, nbytes = [0.0] * len(names), [0] * len(names)
    for w in windows:
        per_token = w["nll_sum"] / w["n_scored"]
        for i in range(w["first_scored"], w["end"]):
            f = owner[start[i]]
            nll[f] += per_token
            nbytes[f] += start[i + 1] - start[i]
    for f in sorted(range(len(names)), key=lambda f: -nbytes[f]):
        print(f"{names[f]:20s} {nbytes[f]:9d} bytes  {nll[f] / math.log(2) / nbytes[f]:.3f} bpb")


if __name__ == "__main__":
    main(sys.argv)
