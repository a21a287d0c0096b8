#!/usr/bin/env python3
"""Per-kernel totals of an `ncu --csv --metrics gpu__time_duration.sum` log.

usage: scripts/ncu-summary.py ncu.csv
Prints one line per kernel name (template arguments and parameters cut off), busiest first:
total ms, share of the sum, launches, mean us.
"""
import csv
import sys
from collections import defaultdict


def short(name):
    """The kernel's name with its namespaces, template arguments and parameters dropped."""
    name = name.replace("(anonymous namespace)::", "").replace("void ", "")
    depth, out = 0, []
    for ch in name:  # drop <...> and (...) groups
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).split("::")[-1].strip()


def main(path):
    with open(path, newline="", errors="replace") as f:
        lines = [ln for ln in f if ln.startswith('"')]  # the CSV rows (ncu's own log is not quoted)
    total = defaultdict(float)
    count = defaultdict(int)
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "")
        value = float(row["Metric Value"].replace(",", ""))
        scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}.get(unit, 1e-6)
        name = short(row["Kernel Name"])
        total[name] += value * scale
        count[name] += 1
    s = sum(total.values())
    print(f"{'kernel':60s} {'ms':>10s} {'share':>7s} {'launches':>9s} {'mean us':>9s}")
    for name, ms in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{name[:60]:60s} {ms:10.3f} {100 * ms / s:6.1f}% {count[name]:9d} "
              f"{1e3 * ms / count[name]:9.1f}")
    print(f"{'all kernels':60s} {s:10.3f} {100.0:6.1f}% {sum(count.values()):9d}")


if __name__ == "__main__":
    main(sys.argv[1])
