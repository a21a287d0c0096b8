#!/usr/bin/env python3
"""Writes tests/data/trained_default/ from models/default (run it after shipping a new model).

  python3 tests/reference/make_trained_default.py [MODEL_DIR] [OUT_DIR]

Keeps OUT_DIR/tokens.json (32 token ids; drawn anew when the model's vocabulary lacks one) and
writes, all from k3_ref.py in float64:
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
    swaps             per router near-tie (position, layer): what swapping its expert does to
                      every position's logits (rel [T], argmax_moves [T]) in the exact model: a
                      mode that swaps it is that much farther from the reference after it
    first_ids         the one-token prompts of logits_first_*_bf16.npy: ids whose every
                      bf16-rounded matmul input (prefill and decode) lies at least MIN_ULPS fp32 ulps from a bf16
                      rounding midpoint (closer, the engine's fp32 arithmetic decides the
                      rounding as often as the float64 reference does) and rounds alike in the
                      reference's fp32 emulation, with router margins
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


def rounded_inputs(m, token):
    """Every bf16-rounded matmul input of a one-token prefill and decode (before rounding, in
    call order); the two rows of logits; the router margin. In an fp32 model (R.load(...,
    np.float32)) the rounded values stay fp32, so the run is an fp32 emulation throughout."""
    seen = []
    plain = R.round_bf16

    def watching(x):
        seen.append(np.array(x, dtype=np.float64).ravel())
        return plain(x).astype(x.dtype)

    R.round_bf16 = watching
    try:
        trace = {}
        prefill = R.forward_prefill(m, [token], trace)[0]
        decode = R.forward_decode(m, [token])[0]
    finally:
        R.round_bf16 = plain
    return np.concatenate(seen), prefill, decode, router_margins(m, trace, 1)[0]


def far_from_midpoints(x64):
    """Whether every rounded input lies at least MIN_ULPS fp32 ulps from a bf16 rounding midpoint."""
    bits = x64.astype(np.float32).view(np.uint32).astype(np.int64)
    return bool(np.all(np.abs((bits & 0xFFFF) - 0x8000) >= MIN_ULPS))


def rounds_alike(x64, x32):
    """Whether the reference's fp32 emulation, whose sums run in another order than the engine's,
    rounds every input (x32, its values) to the bf16 that float64 (x64) does: an input that
    cancels, a small sum of large terms, carries an fp32 error of many of its own ulps, which the
    distance to the midpoint alone does not see (on the model shipped 2026-12-07 (b), the AVX2 path
    rounded one such input of an otherwise MIN_ULPS-clear prompt the other way)."""
    return bool(np.array_equal(R.round_bf16(x64), R.round_bf16(x32)))


def swapping_router(target_layer, target_pos):
    """R.router with, at one layer and position, the k-th chosen expert replaced by the (k+1)-th
    in the biased order: what a rounding does at a router near-tie."""
    plain = R.router

    def router(m, l, x):
        dense, sel = plain(m, l, x)
        if l != target_layer:
            return dense, sel
        cfg = m.cfg
        p = m.layer(l) + "block_sparse_moe.gate."
        k = cfg["num_experts_per_token"]
        s = R.sigmoid(R.linear(x[target_pos:target_pos + 1], m.w[p + "weight"], exact=True))[0]
        order = np.argsort(-(s + m.w[p + "e_score_correction_bias"]), kind="stable")
        chosen = np.concatenate([order[:k - 1], order[k:k + 1]])       # [k]
        ws = s[chosen]
        if k > 1 and cfg.get("moe_renormalize", True):
            ws = ws / (np.sum(ws) + R.ROUTER_EPS)
        dense, sel = dense.copy(), sel.copy()
        dense[target_pos] = 0
        dense[target_pos, chosen] = ws * cfg.get("routed_scaling_factor", 1.0)
        sel[target_pos] = chosen
        return dense, sel

    return plain, router


def swap_effects(m, ids, trace, exact):
    """What each router near-tie of the text does when a rounding swaps it: for every MoE layer
    and position with a biased top-k gap under ROUTER_MARGIN, the exact prefill rerun with that
    expert swapped. One entry each: position, layer, rel [T] (the relative L2 change of every
    position's logits; those after the tie change through the recurrent state and the cache)
    and argmax_moves [T] (whether the swap moves that position's argmax)."""
    k = m.cfg["num_experts_per_token"]
    out = []
    for name, logits in trace.items():
        if not name.endswith(".moe.router_logits"):
            continue
        layer = int(name.split(".")[1])
        bias = m.w[m.layer(layer) + "block_sparse_moe.gate.e_score_correction_bias"]
        biased = -np.sort(-(R.sigmoid(logits) + bias[None, :]), axis=-1)
        for t in np.nonzero(biased[:, k - 1] - biased[:, k] < ROUTER_MARGIN)[0]:
            plain, R.router = swapping_router(layer, int(t))
            try:
                swapped = R.forward_prefill(m, ids)
            finally:
                R.router = plain
            rel = np.linalg.norm(swapped - exact, axis=-1) / np.linalg.norm(exact, axis=-1)
            moves = np.argmax(swapped, axis=-1) != np.argmax(exact, axis=-1)
            out.append({"position": int(t), "layer": layer, "rel": rel.tolist(),
                        "argmax_moves": moves.tolist()})
    return sorted(out, key=lambda e: (e["position"], e["layer"]))


def tokens(out, ranks):
    """OUT_DIR/tokens.json; rewritten with 32 ids drawn from the BPE ranks when missing or when
    an id lies outside them (a model with a smaller vocabulary)."""
    path = os.path.join(out, "tokens.json")
    if os.path.exists(path):
        with open(path) as f:
            ids = json.load(f)
        if max(ids) < ranks:
            return ids
    ids = np.random.default_rng(SEED).integers(0, ranks, 32).tolist()
    with open(path, "w") as f:
        json.dump(ids, f)
    return ids


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else "models/default"
    out = sys.argv[2] if len(sys.argv) > 2 else "tests/data/trained_default"
    m = R.load(model_dir)
    ids = tokens(out, m.cfg["vocab_size"] - 256)
    m32 = R.load(model_dir, np.float32)  # the fp32 emulation, for rounds_alike
    save = lambda name, a: np.save(os.path.join(out, name), a.astype(np.float32))  # noqa: E731

    R.set_round_bf16(m, False)
    trace = {}
    exact = R.forward_prefill(m, ids, trace)
    save("logits_prefill.npy", exact)
    save("logits_decode.npy", R.forward_decode(m, ids))
    top2 = -np.sort(-exact, axis=-1)[:, :2]
    ties = {"router_margin": router_margins(m, trace, len(ids)).tolist(),
            "logit_margin": (top2[:, 0] - top2[:, 1]).tolist(),
            "swaps": swap_effects(m, ids, trace, exact)}

    R.set_round_bf16(m, True)
    save("logits_prefill_bf16.npy", R.forward_prefill(m, ids))
    save("logits_decode_bf16.npy", R.forward_decode(m, ids))
    first, prefill_rows, decode_rows = [], [], []
    rng = np.random.default_rng(SEED)
    for token in rng.permutation(np.arange(256, m.cfg["vocab_size"] - 256)):
        x64, prefill, decode, margin = rounded_inputs(m, int(token))
        if margin < ROUTER_MARGIN or not far_from_midpoints(x64):
            continue
        R.set_round_bf16(m32, True)  # the set of rounded weights is per model: m32's own
        x32 = rounded_inputs(m32, int(token))[0]
        R.set_round_bf16(m, True)
        if rounds_alike(x64, x32):
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
