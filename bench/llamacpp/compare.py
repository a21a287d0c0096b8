#!/usr/bin/env python3
"""k3 bench against llama-bench on the same model, interleaved, same threads.

usage: compare.py --model CKPT_DIR --gguf MODEL.gguf [-p 512] [-n 64] [-t 1,2] [-r 3]
                  [--rounds 3] [--k3 build/bin/k3] [--k3-args "--precision bf16"]
                  [--llama-bench PATH] [--rt] [--json OUT]

For every thread count, each round runs prefill (ppP) and decode (tgN from an empty context)
on k3 and then on llama.cpp (A B A B ...), so drift in the machine's speed (other load,
clocks) lands on both. Every sample of every round is pooled; the table shows the median
tokens/s of each engine and their ratio. --rt runs both under SCHED_FIFO (chrt -f 10):
on a loaded 2-core box thread barriers otherwise stall when a worker is descheduled.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys


def fail(msg):
    sys.exit(f"compare.py: {msg}")


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-600:]}")
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError as e:
        fail(f"cannot parse the JSON of {' '.join(cmd)}: {e}\n{r.stdout[-400:]}")


def k3_samples(args, prefix, threads, prompt, gen):
    cmd = prefix + [args.k3, "bench", "-m", args.model, "-p", str(prompt), "-n", str(gen),
                    "-t", str(threads), "-r", str(args.r), "-o", "json"] + shlex.split(args.k3_args)
    rows = run_json(cmd)
    return [s for row in rows for s in row["samples_tokens_per_s"]]


def llama_samples(args, prefix, threads, prompt, gen):
    cmd = prefix + [args.llama_bench, "-m", args.gguf, "-p", str(prompt), "-n", str(gen),
                    "-t", str(threads), "-r", str(args.r), "-o", "json"]
    rows = run_json(cmd)
    return [s for row in rows for s in row["samples_ts"]]


def realtime_prefix(wanted):
    if not wanted:
        return []
    ok = subprocess.run(["chrt", "-f", "10", "true"], capture_output=True).returncode == 0
    if not ok:
        print("compare.py: chrt -f 10 refused; normal scheduling", file=sys.stderr)
    return ["chrt", "-f", "10"] if ok else []


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.environ.get("LCPP_ROOT", os.path.expanduser("~/.cache/k3-llamacpp"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="k3 checkpoint directory")
    ap.add_argument("--gguf", required=True, help="the same checkpoint converted by convert.py")
    ap.add_argument("-p", type=int, default=512, help="prompt tokens of the prefill test")
    ap.add_argument("-n", type=int, default=64, help="tokens of the decode test")
    ap.add_argument("-t", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("-r", type=int, default=3, help="repeats per engine per round")
    ap.add_argument("--rounds", type=int, default=3, help="A B rounds per test")
    ap.add_argument("--k3", default=os.path.join(here, "..", "..", "build", "bin", "k3"))
    ap.add_argument("--k3-args", default="", help="more k3 bench flags, e.g. '--precision bf16'")
    ap.add_argument("--llama-bench", default=os.path.join(root, "src", "build", "bin", "llama-bench"))
    ap.add_argument("--rt", action="store_true", help="run both under SCHED_FIFO")
    ap.add_argument("--json", help="also write every sample here")
    args = ap.parse_args()
    for path in (args.k3, args.llama_bench):
        if not os.access(path, os.X_OK):
            fail(f"{path} is not an executable (build k3, and bench/llamacpp/build.sh)")
    prefix = realtime_prefix(args.rt)
    tests = [("pp%d" % args.p, args.p, 0), ("tg%d" % args.n, 0, args.n)]
    results = []
    for threads in [int(t) for t in args.t.split(",")]:
        for name, prompt, gen in tests:
            if prompt == 0 and gen == 0:
                continue
            k3, llama = [], []
            for round_no in range(args.rounds):
                k3 += k3_samples(args, prefix, threads, prompt, gen)
                llama += llama_samples(args, prefix, threads, prompt, gen)
                print(f"  -t {threads} {name} round {round_no + 1}/{args.rounds}: "
                      f"k3 {statistics.median(k3):.1f}  llama.cpp {statistics.median(llama):.1f}",
                      file=sys.stderr)
            results.append({"test": name, "threads": threads, "k3_samples": k3, "llama_samples": llama,
                            "k3_median": statistics.median(k3), "llama_median": statistics.median(llama)})
    print(f"| model | test | -t | k3 t/s | llama.cpp t/s | k3 / llama.cpp |")
    print(f"| --- | --- | ---: | ---: | ---: | ---: |")
    model = os.path.basename(os.path.normpath(args.model))
    for row in results:
        ratio = row["k3_median"] / row["llama_median"]
        print(f"| {model} | {row['test']} | {row['threads']} | {row['k3_median']:.1f} | "
              f"{row['llama_median']:.1f} | {ratio:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "gguf": args.gguf, "rt": bool(prefix), "k3_args": args.k3_args,
                       "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
