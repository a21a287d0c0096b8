#!/usr/bin/env python3
"""Cross-check k3_ref's KDA (recurrence §3.6 and chunk form §3.8) against fla-core's naive KDA.

A developer script, not part of CI (it needs torch, einops and fla-core; see README.md):

    pip install torch einops && pip install fla-core --no-deps
    python3 tests/reference/check_kda_vs_fla.py

fla's references live in ``fla/ops/kda/naive.py``: ``naive_recurrent_kda`` and
``naive_chunk_kda`` (q, k, v, g, beta, scale, initial_state, output_final_state). Their
conventions, checked against the source:

* g is the per-key-channel log decay [B, T, H, K] (state rows scaled by exp(g)), beta [B, T, H];
* q is multiplied by ``scale`` (default K^-0.5) inside; q and k are NOT L2-normalised inside, so
  we pass already-normalised q, k and let fla apply the scale;
* ``naive_chunk_kda`` needs T % chunk_size == 0: we pad the tail with q = k = v = g = beta = 0
  (harmless, §3.8) and drop the padded rows;
* both cast their inputs with ``.to(torch.float)``, i.e. to float32. We therefore run them twice:
  as shipped (float32 internally; expect ~1e-6 relative) and from a copy of the same source in
  which ``torch.float`` is replaced by ``torch.float64`` (expect ~1e-14 or better).

The file is loaded with importlib straight from the installed package, so ``fla/__init__``
(which imports triton kernels) never runs. Exits non-zero on any mismatch.
"""

import importlib.util
import os
import re
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3_ref as R  # noqa: E402

try:
    import torch
except ImportError:
    sys.exit("torch is not installed; see tests/reference/README.md")

TOL_F64 = 1e-12   # relative to max |o| (float64 fla copy vs our float64)
TOL_F32 = 1e-4    # fla as shipped (float32 inside) vs our float64


def load_fla_naive():
    """Return (module as shipped, float64 copy) of fla/ops/kda/naive.py, without importing fla."""
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("fla-core is not installed (pip install fla-core --no-deps)")
    path = os.path.join(spec.submodule_search_locations[0], "ops", "kda", "naive.py")
    src = open(path).read()
    mods = []
    for name, text in (("fla_kda_naive", src),
                       ("fla_kda_naive_f64", re.sub(r"torch\.float\b", "torch.float64", src))):
        mod = types.ModuleType(name)
        mod.__file__ = path
        exec(compile(text, path, "exec"), mod.__dict__)
        mods.append(mod)
    return path, mods[0], mods[1]


def random_inputs(rng, T, H, K, V):
    """Float64 KDA inputs as the K3 layer produces them (§3.4-3.5): q, k L2-normalised (q not
    yet scaled), v free, g from the safe gate L·σ(exp(A)(f + dt)), beta = σ(·)."""
    q = R.l2norm(rng.standard_normal((T, H, K)))
    k = R.l2norm(rng.standard_normal((T, H, K)))
    v = rng.standard_normal((T, H, V))
    A = np.log(rng.uniform(0.6, 2.7, size=H))
    f = rng.standard_normal((T, H, K))
    dt = rng.uniform(-4.0, 1.0, size=(H, K))
    g = -5.0 * R.sigmoid(np.exp(A)[None, :, None] * (f + dt[None]))
    beta = R.sigmoid(rng.standard_normal((T, H)))
    S0 = 0.3 * rng.standard_normal((H, K, V))
    return q, k, v, g, beta, S0


def to_t(x, pad_to=None):
    """[T, ...] numpy -> [1, T', ...] float64 torch tensor, zero-padded to T' = pad_to."""
    if pad_to is not None and pad_to > x.shape[0]:
        x = np.concatenate([x, np.zeros((pad_to - x.shape[0],) + x.shape[1:])], axis=0)
    return torch.from_numpy(np.ascontiguousarray(x)).unsqueeze(0)


def run_fla(mod, fn, q, k, v, g, beta, S0, K, chunk=None):
    T = q.shape[0]
    pad = None if chunk is None else -(-T // chunk) * chunk
    kw = dict(scale=K ** -0.5, initial_state=torch.from_numpy(S0).unsqueeze(0),
              output_final_state=True)
    if chunk is not None:
        kw["chunk_size"] = chunk
    o, S = getattr(mod, fn)(to_t(q, pad), to_t(k, pad), to_t(v, pad), to_t(g, pad),
                            to_t(beta, pad), **kw)
    return o[0, :T].double().numpy(), S[0].double().numpy()


def main():
    torch.set_grad_enabled(False)
    path, naive32, naive64 = load_fla_naive()
    print(f"fla naive KDA: {path}")
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    rng = np.random.default_rng(20261130)
    shapes = [  # (T, H, K, V)
        (1, 1, 16, 16), (1, 3, 16, 16), (63, 2, 16, 16), (64, 3, 16, 16), (65, 4, 16, 16),
        (200, 3, 32, 32), (130, 2, 16, 24), (128, 4, 32, 32),
    ]
    failed = False
    hdr = ("T", "H", "K", "V", "ours rec~chunk", "rec~fla64 rec", "chunk~fla64 chunk",
           "state f64", "rec~fla32 rec", "chunk~fla32 chunk")
    print("%4s %2s %3s %3s  %14s %14s %17s %10s %14s %17s" % hdr)
    worst = {}
    for T, H, K, V in shapes:
        q, k, v, g, beta, S0 = random_inputs(rng, T, H, K, V)
        qs = q * K ** -0.5                                    # our kernels take q scaled
        o_rec, S_rec = R.kda_recurrent(qs, k, v, g, beta, S0)
        o_chk, S_chk = R.kda_chunk(qs, k, v, g, beta, S0)
        ref = np.max(np.abs(o_rec))
        refS = np.max(np.abs(S_rec))
        f64r, S64r = run_fla(naive64, "naive_recurrent_kda", q, k, v, g, beta, S0, K)
        f64c, S64c = run_fla(naive64, "naive_chunk_kda", q, k, v, g, beta, S0, K, chunk=64)
        f32r, _ = run_fla(naive32, "naive_recurrent_kda", q, k, v, g, beta, S0, K)
        f32c, _ = run_fla(naive32, "naive_chunk_kda", q, k, v, g, beta, S0, K, chunk=64)
        errs = dict(
            ours=np.max(np.abs(o_rec - o_chk)) / ref,
            rec64=np.max(np.abs(o_rec - f64r)) / ref,
            chk64=np.max(np.abs(o_chk - f64c)) / ref,
            state64=max(np.max(np.abs(S_rec - S64r)), np.max(np.abs(S_chk - S64c)),
                        np.max(np.abs(S_rec - S_chk))) / refS,
            rec32=np.max(np.abs(o_rec - f32r)) / ref,
            chk32=np.max(np.abs(o_chk - f32c)) / ref,
        )
        for key, val in errs.items():
            worst[key] = max(worst.get(key, 0.0), val)
        bad = [key for key, val in errs.items() if val > (TOL_F32 if key.endswith("32") else TOL_F64)]
        failed |= bool(bad)
        print("%4d %2d %3d %3d  %14.2e %14.2e %17.2e %10.2e %14.2e %17.2e %s" % (
            T, H, K, V, errs["ours"], errs["rec64"], errs["chk64"], errs["state64"],
            errs["rec32"], errs["chk32"], "MISMATCH " + ",".join(bad) if bad else ""))
    print("max abs errors relative to max|o| (state: to max|S|):")
    for key, val in worst.items():
        print(f"  {key:8s} {val:.3e}")
    print("FAIL" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
