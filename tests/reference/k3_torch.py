#!/usr/bin/env python3
"""PyTorch float64 autograd reference of the K3 training loss (k3-spec.md §2-§6), for checking
the engine's whole-model backward.

The forward follows tests/reference/k3_ref.py (the NumPy reference) operation by operation,
written in torch so that autograd gives the gradient of every parameter tensor: KDA through its
token-by-token recurrence, MLA in the expanded form, the router's top-k selection by biased
scores as a fixed choice (gradients flow through the selected sigmoid scores only, so
e_score_correction_bias has none). The loss is the mean next-token cross-entropy, plus, for a
model with an MTP head (num_nextn_predict_layers = 1, docs/TRAINING.md), --mtp-weight times the
head's mean cross-entropy of targets[t+1] over t < T-1.

    python3 tests/reference/k3_torch.py MODEL_DIR --tokens 1,2,3 --targets 2,3,4 \
        --grads grads.safetensors --loss 5.123 --tol 1e-4

checks the engine's gradients (an F32 safetensors file, tensor names without the
`language_model.` prefix) and loss against autograd's: per tensor max|g − g_ref| / max|g_ref|.
It first checks its own forward against k3_ref.forward_prefill (the chunked KDA form). Exits 1
when any tensor is off by more than --tol, missing, or extra.
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3_ref  # noqa: E402

NOT_DIFFERENTIABLE = ("e_score_correction_bias",)   # selection only (§6.3)


def rmsnorm(x, w, eps):
    return w * (x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps))


def linear(x, W):
    return x @ W.T


def situ_glu(a, b, beta1, beta2):
    return beta1 * torch.tanh(a / beta1) * torch.sigmoid(a) * (beta2 * torch.tanh(b / beta2))


def attn_res_mix(P, B, w_norm, w_proj, eps):
    V = torch.stack(list(B) + [P], dim=0)                            # [n, T, d]
    rho = 1.0 / torch.sqrt(torch.mean(V * V, dim=-1) + eps)          # [n, T]
    s = (V @ (w_norm * w_proj.reshape(-1))) * rho                    # [n, T]
    p = torch.softmax(s, dim=0)
    return torch.einsum("nt,ntd->td", p, V)


def causal_conv_silu(xh, w):
    """xh [T, C] from a zero history; w [C, 1, kc]."""
    kc = w.shape[-1]
    T = xh.shape[0]
    buf = torch.cat([torch.zeros(kc - 1, xh.shape[1], dtype=xh.dtype), xh], dim=0)
    acc = sum(w[:, 0, j] * buf[j:j + T] for j in range(kc))
    return torch.nn.functional.silu(acc)


def l2norm(x, eps=k3_ref.L2NORM_EPS):
    return x / torch.sqrt(torch.sum(x * x, dim=-1, keepdim=True) + eps)


def kda_recurrent(q, k, v, g, beta):
    T, H, K = q.shape
    S = torch.zeros(H, K, v.shape[-1], dtype=q.dtype)
    out = []
    for t in range(T):
        S = torch.exp(g[t])[:, :, None] * S
        u = v[t] - torch.einsum("hkv,hk->hv", S, k[t])
        S = S + beta[t][:, None, None] * k[t][:, :, None] * u[:, None, :]
        out.append(torch.einsum("hkv,hk->hv", S, q[t]))
    return torch.stack(out, dim=0)


def kda_layer(m, w, p, x):
    la = m.cfg["linear_attn_config"]
    H, K = la["num_heads"], la["head_dim"]
    T = x.shape[0]
    q = causal_conv_silu(linear(x, w[p + "q_proj.weight"]), w[p + "q_conv1d.weight"]).reshape(T, H, K)
    k = causal_conv_silu(linear(x, w[p + "k_proj.weight"]), w[p + "k_conv1d.weight"]).reshape(T, H, K)
    v = causal_conv_silu(linear(x, w[p + "v_proj.weight"]), w[p + "v_conv1d.weight"]).reshape(T, H, K)
    f = linear(linear(x, w[p + "f_a_proj.weight"]), w[p + "f_b_proj.weight"]).reshape(T, H, K)
    A = w[p + "A_log"].reshape(-1)[:H]
    dt = w[p + "dt_bias"].reshape(H, K)
    g = la["gate_lower_bound"] * torch.sigmoid(torch.exp(A)[None, :, None] * (f + dt[None]))
    beta = torch.sigmoid(linear(x, w[p + "b_proj.weight"]))
    q = l2norm(q) * K ** -0.5
    k = l2norm(k)
    o = kda_recurrent(q, k, v, g, beta)
    z = linear(x, w[p + "g_proj.weight"]).reshape(T, H, K)
    y = o / torch.sqrt(torch.mean(o * o, dim=-1, keepdim=True) + m.eps) * w[p + "o_norm.weight"] * torch.sigmoid(z)
    return linear(y.reshape(T, H * K), w[p + "o_proj.weight"])


def mla_layer(m, w, p, x):
    cfg = m.cfg
    Hm = cfg["num_attention_heads"]
    dn, dr, dv = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    Lkv = cfg["kv_lora_rank"]
    T = x.shape[0]
    cq = rmsnorm(linear(x, w[p + "q_a_proj.weight"]), w[p + "q_a_layernorm.weight"], k3_ref.MLA_LORA_EPS)
    Q = linear(cq, w[p + "q_b_proj.weight"]).reshape(T, Hm, dn + dr)
    qN, qR = Q[..., :dn], Q[..., dn:]
    a = linear(x, w[p + "kv_a_proj_with_mqa.weight"])
    c = rmsnorm(a[:, :Lkv], w[p + "kv_a_layernorm.weight"], k3_ref.MLA_LORA_EPS)
    r = a[:, Lkv:]
    Wkvb = w[p + "kv_b_proj.weight"].reshape(Hm, dn + dv, Lkv)
    kN = torch.einsum("hnc,sc->shn", Wkvb[:, :dn, :], c)
    vv = torch.einsum("hvc,sc->shv", Wkvb[:, dn:, :], c)
    s = (torch.einsum("thn,shn->hts", qN, kN) + torch.einsum("thr,sr->hts", qR, r)) * (dn + dr) ** -0.5
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    s = torch.where(mask[None], s, torch.tensor(-float("inf"), dtype=s.dtype))
    o = torch.einsum("hts,shv->thv", torch.softmax(s, dim=-1), vv).reshape(T, Hm * dv)
    o = o * torch.sigmoid(linear(x, w[p + "g_proj.weight"]))
    return linear(o, w[p + "o_proj.weight"])


def dense_ffn(m, w, prefix, x):
    a = linear(x, w[prefix + "gate_proj.weight"])
    b = linear(x, w[prefix + "up_proj.weight"])
    return linear(situ_glu(a, b, m.beta1, m.beta2), w[prefix + "down_proj.weight"])


def latent_moe(m, w, p, x, gaps):
    cfg = m.cfg
    E, k = cfg["num_experts"], cfg["num_experts_per_token"]
    s = torch.sigmoid(linear(x, w[p + "gate.weight"]))               # [T, E]
    biased = (s + w[p + "gate.e_score_correction_bias"][None, :]).detach().numpy()
    order = np.argsort(-biased, axis=-1, kind="stable")
    sel = order[:, :k]
    if k < E:                                                        # selection margin
        srt = np.take_along_axis(biased, order, axis=-1)
        gaps.append(float(np.min(srt[:, k - 1] - srt[:, k])))
    sel_t = torch.from_numpy(sel)
    ws = torch.gather(s, 1, sel_t)
    if k > 1 and cfg.get("moe_renormalize", True):
        ws = ws / (torch.sum(ws, dim=-1, keepdim=True) + k3_ref.ROUTER_EPS)
    ws = ws * cfg.get("routed_scaling_factor", 1.0)
    dense = torch.zeros(x.shape[0], E, dtype=x.dtype).scatter(1, sel_t, ws)
    z = linear(x, w[p + "routed_expert_down_proj.weight"])
    c = torch.zeros_like(z)
    for e in range(E):
        rows = np.nonzero(np.any(sel == e, axis=-1))[0]
        if rows.size == 0:
            continue
        ep = p + f"experts.{e}."
        rt = torch.from_numpy(rows)
        ze = z[rt]
        ye = linear(situ_glu(linear(ze, w[ep + "w1.weight"]), linear(ze, w[ep + "w3.weight"]),
                             m.beta1, m.beta2), w[ep + "w2.weight"])
        c = c.index_add(0, rt, dense[rt, e][:, None] * ye)
    if cfg.get("latent_moe_use_norm", True):
        c = rmsnorm(c, w[p + "routed_expert_norm.weight"], m.eps)
    out = linear(c, w[p + "routed_expert_up_proj.weight"])
    if cfg.get("num_shared_experts", 0) > 0:
        out = out + dense_ffn(m, w, p + "shared_experts.", x)
    return out


def forward_logits(m, w, ids, gaps, hidden=None):
    cfg = m.cfg
    eps = m.eps
    bs = cfg["attn_res_block_size"]
    h = w["model.embed_tokens.weight"][torch.from_numpy(np.asarray(ids, dtype=np.int64))]
    P, B = h, []
    for l in range(cfg["num_hidden_layers"]):
        pl = m.layer(l)
        a = attn_res_mix(P, B, w[pl + "self_attention_res_norm.weight"],
                         w[pl + "self_attention_res_proj.weight"], eps) if B else P
        if l % bs == 0:
            B.append(P)
            P = None
        x = rmsnorm(a, w[pl + "input_layernorm.weight"], eps)
        layer = kda_layer if m.attn_kind[l] == "kda" else mla_layer
        A = layer(m, w, pl + "self_attn.", x)
        P = A if P is None else P + A
        mm = attn_res_mix(P, B, w[pl + "mlp_res_norm.weight"], w[pl + "mlp_res_proj.weight"], eps)
        xf = rmsnorm(mm, w[pl + "post_attention_layernorm.weight"], eps)
        if m.ffn_kind[l] == "dense":
            F = dense_ffn(m, w, pl + "mlp.", xf)
        else:
            F = latent_moe(m, w, pl + "block_sparse_moe.", xf, gaps)
        P = P + F
    xo = attn_res_mix(P, B, w["model.output_attn_res_norm.weight"],
                      w["model.output_attn_res_proj.weight"], eps)
    if hidden is not None:
        hidden.append(xo)
    return linear(rmsnorm(xo, w["model.norm.weight"], eps), w["lm_head.weight"])


def mtp_logits(m, w, ids, xo, gaps):
    """The depth-1 MTP head: positions t < T-1, from h_t = xo[t] and the embedding of ids[t+1];
    one layer with plain residuals (MLA; LatentMoE when the model has experts, else dense)."""
    cfg, eps = m.cfg, m.eps
    p = m.layer(cfg["num_hidden_layers"])
    e = w["model.embed_tokens.weight"][torch.from_numpy(np.asarray(ids[1:], dtype=np.int64))]
    u = linear(torch.cat([rmsnorm(e, w[p + "enorm.weight"], eps),
                          rmsnorm(xo[:-1], w[p + "hnorm.weight"], eps)], dim=-1),
               w[p + "eh_proj.weight"])
    u = u + mla_layer(m, w, p + "self_attn.", rmsnorm(u, w[p + "input_layernorm.weight"], eps))
    xf = rmsnorm(u, w[p + "post_attention_layernorm.weight"], eps)
    if cfg.get("num_experts", 0) > 0:
        u = u + latent_moe(m, w, p + "block_sparse_moe.", xf, gaps)
    else:
        u = u + dense_ffn(m, w, p + "mlp.", xf)
    return linear(rmsnorm(u, w[p + "shared_head.norm.weight"], eps), w["lm_head.weight"])


def training_loss(m, w, ids, targets, gaps, mtp_weight):
    """The main loss plus mtp_weight times the MTP head's (when the model has one); also the
    main logits."""
    hidden = []
    logits = forward_logits(m, w, ids, gaps, hidden)
    tg = torch.tensor(targets, dtype=torch.int64)
    loss = torch.nn.functional.cross_entropy(logits, tg)
    if m.cfg.get("num_nextn_predict_layers", 0) == 1 and len(ids) >= 2:
        mtp = torch.nn.functional.cross_entropy(mtp_logits(m, w, ids, hidden[0], gaps), tg[1:])
        loss = loss + mtp_weight * mtp
    return loss, logits


def yardstick(m, ids, targets, w64, mtp_weight):
    """Prints how far PyTorch's own float32 autograd is from float64 on this model: the
    rounding scale an fp32 backward can be held to."""
    w = {n: torch.tensor(v, dtype=torch.float32, requires_grad=w64[n].requires_grad)
         for n, v in m.w.items()}
    loss, _ = training_loss(m, w, ids, targets, [], mtp_weight)
    loss.backward()
    worst, where = 0.0, ""
    for n, t in w.items():
        if t.grad is None:
            continue
        ref = w64[n].grad.numpy()
        rel = float(np.max(np.abs(t.grad.double().numpy() - ref)) / max(np.max(np.abs(ref)), 1e-300))
        if rel > worst:
            worst, where = rel, n
    print(f"yardstick: PyTorch float32 autograd vs float64: max rel err {worst:.2e} ({where})")


def time_step(m, T):
    """Median of 3 float32 eager training steps (forward, loss, backward) on T tokens."""
    import time
    rng = np.random.default_rng(1)
    seq = rng.integers(0, m.cfg["vocab_size"], T + 1).tolist()
    w = {n: torch.tensor(v, dtype=torch.float32,
                         requires_grad=not n.endswith(NOT_DIFFERENTIABLE))
         for n, v in m.w.items()}
    ms = []
    for _ in range(4):
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(forward_logits(m, w, seq[:-1], []),
                                                 torch.tensor(seq[1:], dtype=torch.int64))
        loss.backward()
        ms.append((time.perf_counter() - t0) * 1e3)
    med = sorted(ms[1:])[1]
    print(f"pytorch eager float32 train step T={T}: median {med:.1f} ms, "
          f"{T / med * 1e3:.0f} tokens/s, {torch.get_num_threads()} threads")
    return 0


def ints(s):
    return [int(v) for v in s.split(",") if v.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--tokens")
    ap.add_argument("--targets")
    ap.add_argument("--grads", help="the engine's gradients (F32 safetensors)")
    ap.add_argument("--loss", type=float, help="the engine's loss")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--mtp-weight", type=float, default=0.3,
                    help="weight of the MTP head's loss (models with num_nextn_predict_layers = 1)")
    ap.add_argument("--time", type=int, metavar="T",
                    help="instead: time float32 eager forward + backward on T random tokens")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    m = k3_ref.load(args.model_dir)
    if args.time:
        return time_step(m, args.time)
    if None in (args.tokens, args.targets, args.grads, args.loss):
        ap.error("--tokens, --targets, --grads and --loss are required (or --time)")
    ids, targets = ints(args.tokens), ints(args.targets)
    w = {n: torch.tensor(v, dtype=torch.float64, requires_grad=not n.endswith(NOT_DIFFERENTIABLE))
         for n, v in m.w.items()}
    gaps = []
    loss, logits = training_loss(m, w, ids, targets, gaps, args.mtp_weight)
    ref = k3_ref.forward_prefill(m, ids)
    fwd_err = float(np.max(np.abs(logits.detach().numpy() - ref)) / np.max(np.abs(ref)))
    print(f"forward vs k3_ref.forward_prefill: max rel err {fwd_err:.2e}")
    ok = fwd_err < 1e-10
    if gaps:
        print(f"router selection margin (min top-k gap of biased scores): {min(gaps):.2e}")
        ok = ok and min(gaps) > 1e-5
    loss.backward()
    loss_err = abs(args.loss - loss.item()) / abs(loss.item())
    print(f"loss: engine {args.loss:.8f} autograd {loss.item():.8f} rel err {loss_err:.2e}")
    ok = ok and loss_err <= args.tol
    yardstick(m, ids, targets, w, args.mtp_weight)
    got = k3_ref.read_safetensors(args.grads)
    worst = 0.0
    for name in sorted(w):
        if name not in got:
            print(f"MISSING {name}")
            ok = False
            continue
        want = w[name].grad
        g = got[name].reshape(w[name].shape)
        if want is None:                                    # not differentiable: must be zero
            rel = float(np.max(np.abs(g)))
            label = "(no gradient)"
        else:
            want = want.numpy()
            rel = float(np.max(np.abs(g - want)) / max(np.max(np.abs(want)), 1e-300))
            label = f"max|g| {np.max(np.abs(want)):.2e}"
        worst = max(worst, rel)
        flag = "" if rel <= args.tol else "  FAIL"
        print(f"{name:72s} rel err {rel:.2e}  {label}{flag}")
        ok = ok and rel <= args.tol
    for name in sorted(set(got) - set(w)):
        print(f"EXTRA {name}")
        ok = False
    print(f"{len(w)} tensors, max rel err {worst:.2e} (tol {args.tol:g}): {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
