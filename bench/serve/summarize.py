#!/usr/bin/env python3
"""Medians of bench/serve/run.sh or vs-llama-server.sh output (stdin) as a markdown table, per
prefix-cache setting and, where runs carry a label (vs-llama-server.sh: k3 / llama), per server."""
import json
import statistics
import sys

rows, shared, cache = {}, {}, None
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if "cache_mb" in r:
        cache = r["cache_mb"]
    elif "system_words" in r:
        shared.setdefault(cache, []).append(r)
    else:
        rows.setdefault((cache, r.get("label", ""), r["concurrency"]), []).append(r)

def med(rs, k):
    """Median over the runs that have the value (NaN: no window where all requests decoded)."""
    xs = [r[k] for r in rs if k in r and r[k] == r[k]]
    return statistics.median(xs) if xs else float("nan")

labelled = any(k[1] for k in rows)
print("| prefix cache | %sconcurrency | runs | decode tok/s (all decoding) | decode tok per "
      "engine CPU s | end-to-end tok/s | TTFT p50 ms | ITL p50 ms | ITL p95 ms | errors |"
      % ("server | " if labelled else ""))
print("|---|%s---|---|---|---|---|---|---|---|---|" % ("---|" if labelled else ""))
for (c_mb, label, conc), rs in sorted(rows.items(), key=lambda kv: (-kv[0][0], kv[0][2], kv[0][1])):
    print("| %s | %s%d | %d | %.0f | %.0f | %.0f | %.0f | %.1f | %.1f | %d |" % (
        "on" if c_mb else "off", label + " | " if labelled else "", conc, len(rs),
        med(rs, "decode_tok_s"), med(rs, "decode_tok_per_engine_cpu_s"),
        med(rs, "throughput_tok_s"), med(rs, "ttft_p50_ms"),
        med(rs, "itl_p50_ms"), med(rs, "itl_p95_ms"), sum(r["errors"] for r in rs)))
if not shared:
    sys.exit(0)
print()
print("| prefix cache | runs | prompt tokens | first TTFT ms | later TTFT ms (median) | cached "
      "tokens | speedup (median) |")
print("|---|---|---|---|---|---|---|")
for c_mb, rs in sorted(shared.items(), key=lambda kv: -kv[0]):
    print("| %s | %d | %d | %.0f | %.0f | %d | %.1fx |" % (
        "on" if c_mb else "off", len(rs), rs[0]["requests"][0]["prompt_tokens"],
        med(rs, "first_ttft_ms"), med(rs, "later_ttft_ms_median"),
        rs[0]["requests"][1]["cached_tokens"], med(rs, "speedup")))
