#!/usr/bin/env python3
"""The side-by-side table of bench/llamacpp/gpu_side_by_side.sh from its logs.

usage: gpu_table.py OUT_DIR     (reads k3.txt, k3-bf16.txt and llama.txt there)

Medians over the rounds the logs hold, per case: k3 in fp32 and bf16 precision against
llama.cpp (`llama-bench` tg128 for batch-1 decode and pp8192 for prefill; `llama-batched-bench`
S_TG for 16 and 64 sequences), with the ratios. Prints a markdown table.
"""
import os
import re
import statistics
import sys


def read(path):
    if not os.path.exists(path):
        sys.exit(f"gpu_table.py: no {path} (run bench/llamacpp/gpu_side_by_side.sh first)")
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def k3_numbers(text):
    """{case: [tok/s per round]} from `k3-bench-cuda e2e` output."""
    out = {}
    for m in re.finditer(r"^decode batch\s+(\d+): .*?, ([\d.]+) tok/s aggregate", text, re.M):
        out.setdefault(f"decode {m.group(1)}", []).append(float(m.group(2)))
    for m in re.finditer(r"^prefill (\d+) tokens, (\w+): ([\d.]+) tok/s", text, re.M):
        out.setdefault(f"prefill {m.group(1)} {m.group(2)}", []).append(float(m.group(3)))
    return out


def llama_numbers(text):
    """{case: [tok/s per round]} from llama-bench and llama-batched-bench tables."""
    out = {}
    for m in re.finditer(r"\|\s*(pp|tg)(\d+)\s*\|\s*([\d.]+) ±", text):
        case = f"prefill {m.group(2)}" if m.group(1) == "pp" else "decode 1"
        out.setdefault(case, []).append(float(m.group(3)))
    # batched-bench rows: | PP | TG | B | N_KV | T_PP | S_PP | T_TG | S_TG | T | S |
    for m in re.finditer(r"^\|\s*\d+\s*\|\s*\d+\s*\|\s*(\d+)\s*\|(?:\s*[\d.]+\s*\|){4}\s*([\d.]+)",
                         text, re.M):
        if m.group(1) != "1":
            out.setdefault(f"decode {m.group(1)}", []).append(float(m.group(2)))
    return out


def median(xs):
    return statistics.median(xs) if xs else None


def fmt(x):
    return "—" if x is None else f"{x:.1f}"


def ratio(a, b):
    return "—" if a is None or b is None else f"{a / b:.2f}×"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    k3 = k3_numbers(read(os.path.join(d, "k3.txt")))
    k3b = k3_numbers(read(os.path.join(d, "k3-bf16.txt")))
    ll = llama_numbers(read(os.path.join(d, "llama.txt")))
    prefill = next((c.split()[1] for c in k3 if c.startswith("prefill")), "8192")
    rows = [("decode, batch 1", "decode 1", "decode 1", "decode 1"),
            ("decode, 16 sequences (aggregate)", "decode 16", "decode 16", "decode 16"),
            ("decode, 64 sequences (aggregate)", "decode 64", "decode 64", "decode 64"),
            (f"prefill {prefill} tokens", f"prefill {prefill} fp32", f"prefill {prefill} bf16",
             f"prefill {prefill}")]
    rounds = max((len(v) for v in ll.values()), default=0)
    print(f"| tok/s (medians of {rounds} rounds) | k3 fp32 | k3 bf16 | llama.cpp | "
          "k3 fp32 / llama.cpp | k3 bf16 / llama.cpp |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, a, b, c in rows:
        x, y, z = median(k3.get(a, [])), median(k3b.get(b, [])), median(ll.get(c, []))
        print(f"| {label} | {fmt(x)} | {fmt(y)} | {fmt(z)} | {ratio(x, z)} | {ratio(y, z)} |")


if __name__ == "__main__":
    main()
