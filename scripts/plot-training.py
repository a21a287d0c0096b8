#!/usr/bin/env python3
"""Compare training runs: one SVG line chart per quantity, a line per run.

    scripts/plot-training.py OUT_PREFIX NAME=DIR [NAME=DIR ...]

Each DIR is a `k3 train` checkpoint (its train_state.json holds the logged history); DIR may
list several, comma-separated, for a run continued from an earlier one's weights (`k3 train -m
FIRST`): their histories are drawn as one line, each continuing at the step the one before
ended. Writes
OUT_PREFIX-loss.svg (training loss, smoothed over 10 steps), OUT_PREFIX-val.svg (held-out bits
per byte) and OUT_PREFIX-maxvio.svg (router MaxVio, smoothed; runs without routers are left
out). Plain SVG, no plotting library needed.
"""
import json
import math
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
W, H, L, R, T, B = 720, 400, 70, 170, 40, 50


def smooth(points, window):
    out = []
    for i in range(len(points)):
        lo = max(0, i - window + 1)
        ys = [y for _, y in points[lo:i + 1]]
        out.append((points[i][0], sum(ys) / len(ys)))
    return out


def nice_ticks(lo, hi, n=6):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=10 * mag)
    first = math.ceil(lo / step) * step
    ticks = []
    v = first
    while v <= hi + 1e-9:
        ticks.append(round(v, 10))
        v += step
    return ticks


def chart(title, ylabel, series, path):
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    if not xs:
        return False
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    pad = 0.05 * (y1 - y0 or 1)
    y0, y1 = y0 - pad, y1 + pad
    sx = lambda x: L + (x - x0) / ((x1 - x0) or 1) * (W - L - R)
    sy = lambda y: T + (y1 - y) / ((y1 - y0) or 1) * (H - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{(W - R + L) / 2}" y="24" text-anchor="middle" font-size="15" '
           f'font-weight="bold">{title}</text>']
    for t in nice_ticks(y0, y1):
        out.append(f'<line x1="{L}" y1="{sy(t):.1f}" x2="{W - R}" y2="{sy(t):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{L - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for t in nice_ticks(x0, x1):
        out.append(f'<text x="{sx(t):.1f}" y="{H - B + 18}" text-anchor="middle">{t:g}</text>')
    out.append(f'<text x="{(W - R + L) / 2}" y="{H - 10}" text-anchor="middle">step</text>')
    out.append(f'<text x="16" y="{(H - B + T) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {(H - B + T) / 2})">{ylabel}</text>')
    out.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#888"/>')
    for i, (name, pts) in enumerate(series):
        c = COLOURS[i % len(COLOURS)]
        d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{d}" fill="none" stroke="{c}" stroke-width="1.6"/>')
        ly = T + 16 + 20 * i
        out.append(f'<line x1="{W - R + 12}" y1="{ly}" x2="{W - R + 36}" y2="{ly}" stroke="{c}" stroke-width="3"/>')
        out.append(f'<text x="{W - R + 42}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True


def main():
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        sys.exit(__doc__)
    prefix = sys.argv[1]
    runs = []
    for arg in sys.argv[2:]:
        name, dirs = arg.split("=", 1)
        history, offset = [], 0
        for d in dirs.split(","):
            with open(f"{d}/train_state.json") as f:
                part = json.load(f)["history"]
            history += [dict(p, step=p["step"] + offset) for p in part]
            offset = history[-1]["step"] if history else offset
        runs.append((name, history))
    loss = [(n, smooth([(p["step"], p["loss"]) for p in h], 10)) for n, h in runs]
    val = [(n, [(p["step"], p["val_bpb"]) for p in h if p.get("val_bpb") is not None])
           for n, h in runs]
    vio = [(n, smooth([(p["step"], p["max_vio"]) for p in h], 10)) for n, h in runs
           if any(p["max_vio"] > 0 for p in h)]
    chart("Training loss (10-step mean)", "nats / token", loss, f"{prefix}-loss.svg")
    chart("Held-out bits per byte", "bits / byte", val, f"{prefix}-val.svg")
    chart("Router MaxVio (10-step mean)", "MaxVio", vio, f"{prefix}-maxvio.svg")
    for n, h in runs:
        last = [p for p in h if p.get("val_bpb") is not None][-1:]
        print(f"{n}: {len(h)} steps, final loss {h[-1]['loss']:.3f}"
              + (f", held-out {last[0]['val_bpb']:.3f} bpb" if last else ""))


if __name__ == "__main__":
    main()
