#!/usr/bin/env python3
"""Re-run k3_ref.py on golden case folders and compare with their stored logits.

    python3 tests/reference/check_golden.py [CASE_DIR ...]

Without arguments it checks every case under tests/data/public_golden (or, without that copy,
../shared/golden beside the repository: the other team's independent reference) and under
tests/data/models (ours).
For each case: float64 prefill vs logits_prefill.npy, float64 decode vs logits_decode.npy
(relative L2 per position <= 1e-6, i.e. float32 storage level; argmax equal everywhere),
prefill vs decode in float64 (<= 1e-10), and greedy.json's continuation when present.
Needs only numpy. Exits non-zero on any mismatch.
"""

import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3_ref as R  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
TOL_STORED = 1e-6      # vs float32-stored float64 logits (storage alone gives ~3e-8)
TOL_PATHS = 1e-10      # float64 prefill (chunk KDA, expanded MLA) vs decode (recurrent, absorbed)


def default_cases():
    dirs = []
    public = os.path.join(REPO, "tests", "data", "public_golden")      # in-repo copy, if any
    if not os.path.isdir(public):
        public = os.path.join(os.path.dirname(REPO), "shared", "golden")
    for root in (public, os.path.join(REPO, "tests", "data", "models")):
        dirs += sorted(os.path.dirname(p) for p in glob.glob(os.path.join(root, "*", "config.json")))
    return dirs


def greedy(m, prompt, n):
    st = R.new_state(m)
    logits = R.forward(m, prompt, st, "prefill")[-1]
    toks = []
    for _ in range(n):
        toks.append(int(np.argmax(logits)))
        logits = R.forward(m, [toks[-1]], st, "decode")[0]
    return toks


def check(case):
    m = R.load(case)
    with open(os.path.join(case, "tokens.json")) as f:
        ids = json.load(f)
    lp = R.forward_prefill(m, ids)
    ld = R.forward_decode(m, ids)
    gp = np.load(os.path.join(case, "logits_prefill.npy")).astype(np.float64)
    gd = np.load(os.path.join(case, "logits_decode.npy")).astype(np.float64)
    res = {
        "prefill_vs_stored": float(R.rel_l2_rows(lp, gp).max()),
        "decode_vs_stored": float(R.rel_l2_rows(ld, gd).max()),
        "prefill_vs_decode": float(R.rel_l2_rows(lp, ld).max()),
    }
    ok = (res["prefill_vs_stored"] <= TOL_STORED and res["decode_vs_stored"] <= TOL_STORED
          and res["prefill_vs_decode"] <= TOL_PATHS
          and (lp.argmax(-1) == gp.argmax(-1)).all() and (ld.argmax(-1) == gd.argmax(-1)).all())
    gpath = os.path.join(case, "greedy.json")
    if os.path.exists(gpath):
        with open(gpath) as f:
            g = json.load(f)
        toks = greedy(m, ids, g["n_new"])
        res["greedy_equal"] = toks == g["continuation"]
        ok = ok and res["greedy_equal"]
    return ok, res


def main(argv):
    cases = argv or default_cases()
    n_ok = n_bad = 0
    for case in cases:
        ok, res = check(case)
        n_ok += ok
        n_bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {os.path.relpath(case)}: "
              + " ".join(f"{k}={v:.2e}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in res.items()))
    print(f"{n_ok} passed, {n_bad} failed")
    return 1 if n_bad or not cases else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
