#!/usr/bin/env python3
"""Writes tests/data/trained_default/ from models/default (run it after shipping a new model).

  python3 tests/reference/make_trained_default.py [MODEL_DIR] [OUT_DIR]

Keeps OUT_DIR/tokens.json (32 token ids) and writes, all from k3_ref.py in float64:
  logits_{prefill,decode}.npy        exact logits [32, V]
  logits_{prefill,decode}_bf16.npy   logits of the rounding reference (--round-bf16)
  logits_first_{prefill,decode}_bf16.npy   rounding-reference logits of one-token prompts [n, V]
                                    (prefill and decode round at different places in MLA)
  ties.json                         where the low-precision modes may legitimately disagree:
    router_margin[t]  the smallest gap, over the MoE layers, between the k-th and (k+1)-th
                      biased router score at position t: below the tests' threshold a mode's
                      rounding can swap an expert, a discrete change of that position's output
    logit_margin[t]   top-1 minus top-2 exact logit at t: below the tests' threshold the argmax
                      is a coin toss under any rounding
    first_ids         the one-token prompts of logits_first_*_bf16.npy: ids whose every
                      bf16-rounded matmul input (prefill and decode) lies at least MIN_ULPS fp32 ulps from a bf16
                      rounding midpoint (closer, the engine's fp32 arithmetic decides the
                      rounding as often as the float64 reference does), with router margins
                      above ROUTER_MARGIN; the engine's bf16 paths must match these to ~1e-7
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3_ref as R  # noqa: E402

MIN_ULPS = 12         # fp32 ulps to the nearest bf16 rounding midpoint (flips seen up to 5)
ROUTER_MARGIN = 5e-4  # as kRouterTie in tests/model/test_golden.cpp
N_FIRST = 8           # single-token prompts kept
SEED = 7


def router_margins(m, trace, T):
    """[T]: the smallest k-th minus (k+1)-th biased router score over the MoE layers."""
    k = m.cfg["num_experts_per_token"]
    out = np.full(T, np.inf)
    for name, logits in trace.items():
        if not name.endswith(".moe.router_logits"):
            continue
        layer = name.split(".")[1]
        bias = m.w[m.layer(int(layer)) + "block_sparse_moe.gate.e_score_correction_bias"]
        biased = -np.sort(-(R.sigmoid(logits) + bias[None, :]), axis=-1)
        out = np.minimum(out, biased[:, k - 1] - biased[:, k])
    return out


def midpoint_distance(m, token):
    """Fewest fp32 ulps between any bf16-rounded input of a one-token prefill or decode and a
    rounding midpoint; the two rows of logits; the router margin."""
    closest = [1 << 30]
    plain = R.round_bf16

    def watching(x):
        bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
        closest[0] = min(closest[0], int(np.min(np.abs((bits & 0xFFFF) - 0x8000))))
        return plain(x)

    R.round_bf16 = watching
    try:
        trace = {}
        prefill = R.forward_prefill(m, [token], trace)[0]
        decode = R.forward_decode(m, [token])[0]
    finally:
        R.round_bf16 = plain
    return closest[0], prefill, decode, router_margins(m, trace, 1)[0]


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else "models/default"
    out = sys.argv[2] if len(sys.argv) > 2 else "tests/data/trained_default"
    with open(os.path.join(out, "tokens.json")) as f:
        ids = json.load(f)
    m = R.load(model_dir)
    save = lambda name, a: np.save(os.path.join(out, name), a.astype(np.float32))  # noqa: E731

    R.set_round_bf16(m, False)
    trace = {}
    exact = R.forward_prefill(m, ids, trace)
    save("logits_prefill.npy", exact)
    save("logits_decode.npy", R.forward_decode(m, ids))
    top2 = -np.sort(-exact, axis=-1)[:, :2]
    ties = {"router_margin": router_margins(m, trace, len(ids)).tolist(),
            "logit_margin": (top2[:, 0] - top2[:, 1]).tolist()}

    R.set_round_bf16(m, True)
    save("logits_prefill_bf16.npy", R.forward_prefill(m, ids))
    save("logits_decode_bf16.npy", R.forward_decode(m, ids))
    first, prefill_rows, decode_rows = [], [], []
    rng = np.random.default_rng(SEED)
    for token in rng.permutation(np.arange(256, m.cfg["vocab_size"] - 256)):
        ulps, prefill, decode, margin = midpoint_distance(m, int(token))
        if ulps >= MIN_ULPS and margin >= ROUTER_MARGIN:
            first.append(int(token))
            prefill_rows.append(prefill)
            decode_rows.append(decode)
            if len(first) == N_FIRST:
                break
    save("logits_first_prefill_bf16.npy", np.stack(prefill_rows))
    save("logits_first_decode_bf16.npy", np.stack(decode_rows))
    ties["first_ids"] = first
    with open(os.path.join(out, "ties.json"), "w") as f:
        json.dump(ties, f, indent=1)
    print(f"{out}: {len(ids)} positions, {sum(r < ROUTER_MARGIN for r in ties['router_margin'])} "
          f"router near-ties, single-token prompts {first}", file=sys.stderr)


if __name__ == "__main__":
    main()
